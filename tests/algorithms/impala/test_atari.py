"""IMPALA on Atari frames: uint8 through the batch and the unrolls, and a short run."""

import gc
import threading
import weakref

import numpy as np
import pytest
import tensorflow as tf

from batchrl.algorithms import IMPALA
from batchrl.config import ConfigError, load_run_config
from batchrl.runners import train
from batchrl.tools.batch_env import BatchEnv
from batchrl.tools.environments import make_env
from batchrl.tools.in_graph_batch_env import InGraphBatchEnv
from batchrl.tools.simulate import simulate

pytest.importorskip("ale_py", reason="pip install -e '.[atari]'")
pytest.importorskip("cv2", reason="pip install -e '.[atari]'")


def quiet(*_, **__):
    pass


@pytest.mark.parametrize("core", ["none", "lstm"])
@pytest.mark.slow  # Out of the default suite: 12 s on 2 busy cores (2026-12-06).
def test_frames_stay_uint8_through_the_batch_and_the_unroll(core):
    """Synchronous IMPALA (runner local) on two Pong games in this process; with an LSTM
    core of TorchBeast's 256 units on the Nature ConvNet too."""
    config = load_run_config(
        "atari_impala",
        [
            "runner.name=local",
            "impala.unroll_length=4",
            "network.torso=shallow",
            f"network.core={core}",
        ],
    )
    envs = [make_env("PongNoFrameskip-v4", episodic_life=True) for _ in range(2)]
    batch_env = InGraphBatchEnv(BatchEnv(envs, blocking=True), seed=0)
    algo = IMPALA(batch_env, config, tf.Variable(0, dtype=tf.int64), seed=0)
    assert batch_env.observ.dtype == tf.uint8
    assert algo.rollout.data["observ"].dtype == tf.uint8
    assert algo.rollout.data["next_observ"].dtype == tf.uint8
    before = [v.numpy() for v in algo.policy.trainable_variables]
    tf.function(lambda: simulate(batch_env, algo, steps=4))()  # One update.
    assert int(algo.optimizer.iterations) == 1
    after = [v.numpy() for v in algo.policy.trainable_variables]
    assert any(not np.array_equal(a, b) for a, b in zip(before, after, strict=True))
    frames = algo.rollout.data["observ"].numpy()  # [4, 2, 84, 84, 4]
    assert frames.shape == (4, 2, 84, 84, 4) and frames.max() > 1  # Bytes, not [0, 1].
    if core == "lstm":
        assert algo.policy.core.units == 256 and algo._state.shape == (2, 512)
        assert np.abs(algo._state.numpy()).sum() > 0
    batch_env.close()


@pytest.mark.parametrize("torso", ["shallow", "deep"])
def test_a_shared_body_is_one_torso_that_the_baseline_trains_too(torso):
    """network.shared_body (the Atari presets): one torso under the policy and the
    baseline, as TorchBeast's feed-forward AtariNet, so the baseline loss alone moves the
    torso; the actors' copies hold the same variables; the separate layout has two."""
    import gymnasium as gym

    from batchrl.algorithms.impala.behaviour_policy import ImpalaBehaviourPolicy
    from batchrl.networks import ImpalaResNet, NatureConvNet
    from batchrl.tools.environments import EnvSpaces

    def build(shared):
        config = load_run_config(
            "atari_impala",
            [f"network.torso={torso}", f"network.shared_body={shared}"],
        )
        spaces = EnvSpaces(config.env, 2)
        return config, IMPALA(spaces, config, tf.Variable(0, dtype=tf.int64), seed=0)

    config, algo = build("true")
    torsos = [m for m in algo.policy.submodules if isinstance(m, (NatureConvNet, ImpalaResNet))]
    assert len(torsos) == 1 and algo.value is None
    _, separate = build("false")
    assert len(separate.trainable_variables) == len(algo.trainable_variables) + len(
        torsos[0].trainable_variables
    )
    frames = tf.random.stateless_uniform([3, 84, 84, 4], [1, 2], 0, 256, tf.int32)
    frames = tf.cast(frames, tf.uint8)
    output, value = algo.policy.with_value(frames)
    np.testing.assert_allclose(output, algo.policy(frames))
    assert output.shape == (3, 6) and value.shape == (3,)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(algo.policy.with_value(frames)[1] ** 2)
    gradients = tape.gradient(loss, torsos[0].trainable_variables)
    assert all(g is not None and float(tf.reduce_max(tf.abs(g))) > 0 for g in gradients)
    space = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
    actor = ImpalaBehaviourPolicy(
        config.impala, config.network, space.shape, gym.spaces.Discrete(6), 0, tf.uint8
    )
    actor.load([v.numpy() for v in algo.behaviour_variables()])
    np.testing.assert_allclose(actor.policy(frames), output, rtol=1e-5)


@pytest.mark.slow  # Out of the default suite: 16 s on 2 busy cores (2026-12-06).
def test_a_short_atari_run_through_the_train_script(tmp_path, monkeypatch, no_new_children):
    """atari_impala cut down to 1,000 steps (4,000 frames) with one actor thread whose 2
    games run in worker processes; the learner's batches hold uint8 frames, the final
    evaluation plays one game (cut at 2,000 frames), and no process is left."""
    dtypes = []
    learn = IMPALA.learn

    def recording_learn(self, batch):
        dtypes.append((batch["observ"].dtype, batch["next_observ"].dtype))
        return learn(self, batch)

    monkeypatch.setattr(IMPALA, "learn", recording_learn)
    overrides = [
        "network.torso=shallow",
        "env.num_envs=2",
        "env.eval_envs=1",
        "env.max_episode_steps=2000",
        "threads.num_actors=1",
        "threads.learner_batch=1",
        "threads.queue_size=1",
        "impala.unroll_length=20",
        "train.total_steps=1000",
        "train.eval_every=1000",
        "train.eval_episodes=1",
        "train.checkpoint_every=1000",
    ]
    config = load_run_config("atari_impala", overrides)
    result = train(config, tmp_path, progress=quiet)
    assert result["step"] >= 1000
    assert np.isfinite(result["eval_return"])
    assert -21 <= result["eval_return"] <= 21  # One game of Pong, cut short.
    assert set(dtypes) == {(tf.uint8, tf.uint8)}  # Recorded when the learner is traced.
    policy = tf.saved_model.load(str(tmp_path / "policy"))
    action = policy(tf.zeros([3, 84, 84, 4], tf.uint8))  # The export takes frames.
    assert action.shape == (3,) and action.dtype == tf.int32


@pytest.mark.parametrize("runner", ["threads", pytest.param("local", marks=pytest.mark.slow)])
def test_a_short_atari_run_on_envpool(runner, tmp_path, monkeypatch, no_new_children):
    """atari_impala with env.engine=envpool cut down to 1,000 steps (4,000 frames) of 2
    games: with the threads runner (one actor thread) and the local one. Training steps
    EnvPool's pools, the final evaluation Gymnasium's game (cut at 2,000 frames); after
    the run every pool is gone (so are its C++ threads: EnvPool's destructor joins
    them, tests/tools/test_envpool_batch_env.py), and no process or actor thread is left."""
    pytest.importorskip("envpool", reason="pip install -e '.[atari,envpool]'")
    from batchrl.tools.envpool_batch_env import EnvPoolBatchEnv

    pools = []
    reset = EnvPoolBatchEnv.reset

    def recording_reset(self, indices=None, seed=None):
        observ = reset(self, indices, seed)
        if seed is not None:
            pools.append(weakref.ref(self._pool))
        return observ

    monkeypatch.setattr(EnvPoolBatchEnv, "reset", recording_reset)
    overrides = [
        "env.engine=envpool",
        f"runner.name={runner}",
        "network.torso=shallow",
        "env.num_envs=2",
        "env.eval_envs=1",
        "env.max_episode_steps=2000",
        "impala.unroll_length=20",
        "train.steps_per_call=100",
        "train.total_steps=1000",
        "train.eval_every=1000",
        "train.eval_episodes=1",
        "train.checkpoint_every=1000",
    ]
    if runner == "threads":
        overrides += ["threads.num_actors=1", "threads.learner_batch=1", "threads.queue_size=1"]
    config = load_run_config("atari_impala", overrides)
    result = train(config, tmp_path, progress=quiet)
    assert result["step"] >= 1000
    assert -21 <= result["eval_return"] <= 21  # One game of Pong, cut short.
    assert pools
    gc.collect()
    assert all(pool() is None for pool in pools)
    assert not [thread for thread in threading.enumerate() if thread.name.startswith("actor-")]


@pytest.mark.parametrize(
    "preset, overrides, message",
    [
        ("cartpole_impala", ["env.episodic_life=true"], "env.episodic_life"),
        ("cartpole_impala", ["env.repeat_action_probability=0.0"], "Atari games"),
        ("cartpole_impala", ["env.full_action_space=true"], "env.full_action_space"),
        ("atari_impala", ["env.repeat_action_probability=1.5"], "env.repeat_action_probability"),
        ("atari_impala", ["env.repeat_action_probability=yes"], "env.repeat_action_probability"),
        ("atari_impala", ["network.torso=medium"], "network.torso"),
        ("atari_impala", ["network.conv_filters=[16]"], "network.conv_filters"),
        ("atari_impala", ["algorithm.name=ppo", "runner.name=local"], "network.torso"),
    ],
)
def test_bad_atari_configs_are_refused_naming_the_key(preset, overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_run_config(preset, overrides)


@pytest.mark.parametrize("preset", ["atari_impala", "pong_impala", "breakout_impala"])
def test_presets_follow_torchbeasts_protocol(preset):
    config = load_run_config(preset)
    assert config.env.id.endswith("NoFrameskip-v4")
    assert config.env.repeat_action_probability == 0.0 and config.env.episodic_life
    assert config.impala.reward_clipping == "abs_one" and config.impala.unroll_length == 80
    assert config.network.torso == "deep" and config.network.core == "none"
    assert load_run_config(preset, ["network.torso=shallow"]).network.torso == "shallow"
    lstm = load_run_config(preset, ["network.core=lstm"]).network
    assert lstm.core == "lstm" and lstm.core_size == 256  # TorchBeast's --use_lstm.
