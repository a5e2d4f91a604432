"""SAC: its schedule of updates, acting, target critics, config checks, XLA, resume, and
learning."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from batchrl.algorithms.sac import SAC, squashed_gaussian
from batchrl.config import ConfigError, load_run_config
from batchrl.envs import make as make_tf_env
from batchrl.replay import RandomStream
from batchrl.runners import train
from batchrl.tools.simulate import simulate


def quiet(*_, **__):
    pass


def pendulum(overrides=(), num_envs=4, seed=0):
    config = load_run_config(
        "pendulum_sac",
        [
            "env.backend=tensorflow",
            f"env.num_envs={num_envs}",
            "sac.buffer_size=1000",
            "sac.batch_size=8",
            "network.policy_layers=[16]",
            "network.value_layers=[16]",
            *overrides,
        ],
    )
    env = make_tf_env("Pendulum-v1", num_envs, seed=seed)
    tf.keras.utils.set_random_seed(seed)  # The networks' initial weights.
    return config, env, SAC(env, config, seed=seed)


def run(env, algo, steps, jit_compile=False):
    call = tf.function(lambda: simulate(env, algo, steps=steps), jit_compile=jit_compile)
    return call()


def critic_weights(algo, target=False):
    critic = algo.target_critic if target else algo.critic
    return [v.numpy() for v in critic.variables]


def test_updates_follow_train_freq_once_the_buffer_holds_learning_starts():
    # 4 agents, an update every 2 batched steps, 3 gradient steps each, learning once the
    # buffer holds 16 transitions: after s steps it holds 4 s, so the updates at s = 4, 6
    # and 8 learn and those at s = 2 do not: 3 x 3 gradient steps in 8 steps.
    _, env, algo = pendulum(["sac.train_freq=2", "sac.gradient_steps=3", "sac.learning_starts=16"])
    run(env, algo, 8)
    assert int(algo.replay.size()) == 32
    assert int(algo.updates) == 9
    for optimizer in (algo.actor_optimizer, algo.critic_optimizer, algo.alpha_optimizer):
        assert int(optimizer.iterations) == 9
    assert int(algo.env_steps) == 32
    assert int(algo.steps_to_update()) == 2
    summaries = {k: float(v) for k, v in algo.summaries().items()}
    assert summaries["sac/updates"] == 9 and summaries["sac/buffer_size"] == 32
    assert summaries["sac/alpha"] < 1.0  # Learned from 1 over 8 steps, before the 9th.
    assert float(algo.log_alpha) < 0.0


def test_learning_waits_for_a_whole_batch_when_learning_starts_is_smaller():
    # learning_starts 4 < batch_size 8: the first update comes once the buffer holds 8.
    _, env, algo = pendulum(["sac.learning_starts=4"])
    run(env, algo, 1)
    assert int(algo.updates) == 0
    run(env, algo, 1)
    assert int(algo.updates) == 1


def test_n_step_windows_reach_the_buffer_after_n_minus_one_steps():
    _, env, algo = pendulum(["sac.n_step=3", "sac.learning_starts=1000"])
    run(env, algo, 5)
    assert int(algo.replay.size()) == 4 * (5 - 2)


def test_warm_up_acts_uniformly_in_the_bounds_then_samples_the_squashed_policy():
    observ = tf.constant([[1.0, 0.0, 0.5], [0.0, 1.0, -2.0], [-1.0, 0.0, 1.0], [0.6, 0.8, 0.0]])
    draw = RandomStream(0 + (1 << 32)).uniform([3, 4, 1])  # The exploration stream's first.
    _, _, warming = pendulum(["sac.learning_starts=5"])  # env_steps 0 < 5: uniform.
    np.testing.assert_allclose(warming.perform(tf.range(4), observ), -2.0 + 4.0 * draw[2])
    _, _, acting = pendulum(["sac.learning_starts=0"])
    mean, log_std = acting.actor.gaussian(observ)
    squashed = tf.tanh(
        mean + tf.exp(log_std) * squashed_gaussian.normal_from_uniforms(draw[0], draw[1])
    )
    np.testing.assert_allclose(acting.perform(tf.range(4), observ), 2.0 * squashed, rtol=1e-6)


def test_deterministic_actions_are_the_squashed_mean_scaled_to_the_bounds():
    _, _, algo = pendulum()
    observ = tf.constant([[1.0, 0.0, 0.5], [0.0, 1.0, -8.0]])
    mean, _ = algo.actor.gaussian(observ)
    np.testing.assert_allclose(algo.act(observ), 2.0 * np.tanh(mean.numpy()), rtol=1e-6)
    sampled = algo.act(observ, deterministic=False)
    assert sampled.shape == (2, 1) and np.all(np.abs(sampled) <= 2.0)
    assert not np.allclose(sampled, algo.act(observ))


def test_the_buffer_stores_environment_actions_mapped_to_minus_one_one():
    _, _, algo = pendulum(["sac.learning_starts=1000"])
    observ = tf.zeros([4, 3])
    action = tf.constant([[2.0], [-2.0], [0.0], [1.0]])  # Pendulum's torque in [-2, 2].
    false = tf.zeros([4], tf.bool)
    algo.experience(tf.range(4), observ, action, tf.ones([4]), false, false, observ)
    stored = algo.replay.read(tf.range(4) * algo.replay.column)  # Each agent's first slot.
    np.testing.assert_allclose(stored["action"][:, 0], [1.0, -1.0, 0.0, 0.5])
    np.testing.assert_allclose(stored["discount"], [0.99] * 4)


def test_the_target_critics_follow_every_interval_of_gradient_steps():
    # tau 1 copies: with an interval of 3, after one update of 3 gradient steps the target
    # critics equal the critics; with an interval of 2 they hold the critics of step 2.
    overrides = ["sac.train_freq=100", "sac.gradient_steps=3", "sac.learning_starts=16"]
    overrides += ["sac.tau=1.0"]
    for interval, equal in ((3, True), (2, False)):
        _, env, algo = pendulum([*overrides, f"sac.target_update_interval={interval}"])
        start = critic_weights(algo, target=True)
        run(env, algo, 100)
        assert int(algo.updates) == 3
        after = critic_weights(algo, target=True)
        assert all(not np.array_equal(a, b) for a, b in zip(start, after))
        same = [np.array_equal(a, b) for a, b in zip(after, critic_weights(algo))]
        assert all(same) if equal else not any(same)


def test_polyak_targets_trail_the_critics():
    _, env, algo = pendulum(["sac.learning_starts=16", "sac.tau=0.5"])
    start = critic_weights(algo, target=True)
    run(env, algo, 16)
    after = critic_weights(algo, target=True)
    assert all(not np.array_equal(a, b) for a, b in zip(start, after))
    assert any(not np.array_equal(a, b) for a, b in zip(after, critic_weights(algo)))


def test_a_fixed_temperature_stays_and_has_no_optimizer():
    _, env, algo = pendulum(["sac.ent_coef=0.2", "sac.learning_starts=16"])
    assert not hasattr(algo, "alpha_optimizer")
    run(env, algo, 8)
    assert int(algo.updates) > 0
    assert float(algo.summaries()["sac/alpha"]) == pytest.approx(0.2)
    assert float(algo.summaries()["sac/alpha_loss"]) == 0.0


def test_auto_target_entropy_is_minus_the_action_dimensions():
    _, _, algo = pendulum()
    assert algo._target_entropy == -1.0
    _, _, algo = pendulum(["sac.target_entropy=-0.5", "sac.ent_coef=auto"])
    assert algo._target_entropy == -0.5


@pytest.mark.parametrize(
    "override, key",
    [
        ("sac.buffer_size=0", "sac.buffer_size"),
        ("sac.batch_size=0", "sac.batch_size"),
        ("sac.batch_size=2000000", "sac.batch_size"),
        ("sac.learning_starts=-1", "sac.learning_starts"),
        ("sac.train_freq=0", "sac.train_freq"),
        ("sac.gradient_steps=0", "sac.gradient_steps"),
        ("sac.learning_rate=0", "sac.learning_rate"),
        ("sac.discount=1.5", "sac.discount"),
        ("sac.n_step=0", "sac.n_step"),
        ("sac.tau=0", "sac.tau"),
        ("sac.target_update_interval=0", "sac.target_update_interval"),
        ("sac.ent_coef=0", "sac.ent_coef"),
        ("sac.ent_coef=sometimes", "sac.ent_coef"),
        ("sac.ent_coef=true", "sac.ent_coef"),
        ("sac.ent_coef_init=0", "sac.ent_coef_init"),
        ("sac.target_entropy=high", "sac.target_entropy"),
        ("sac.checkpoint_replay=sometimes", "sac.checkpoint_replay"),
        ("sac.buffer_size=4", "env.num_envs"),
        ("sac.observ_dtype=float64", "sac.observ_dtype"),
        ("sac.buffer_size=31", "sac.compact_replay"),  # 8 columns of at least 4 slots.
    ],
)
def test_bad_values_are_refused_at_config_load(override, key):
    several = key in ("env.num_envs", "sac.compact_replay")
    overrides = ["env.num_envs=8", "sac.batch_size=2"] if several else []
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_run_config("pendulum_sac", [*overrides, override])


def test_discrete_actions_are_refused_at_construction():
    config = load_run_config("pendulum_sac", ["env.id=CartPole-v1", "env.backend=tensorflow"])
    with pytest.raises(ConfigError, match="needs a Box action space; env.id='CartPole-v1'.*DQN"):
        SAC(make_tf_env("CartPole-v1", 2), config)


def test_unbounded_actions_are_refused_at_construction():
    class Unbounded:
        action_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)

    config = load_run_config("pendulum_sac")
    with pytest.raises(ConfigError, match="needs a bounded Box.*env.id='Pendulum-v1'"):
        SAC(Unbounded(), config)


def test_checkpoint_replay_false_leaves_the_buffer_out_of_checkpoints():
    choices = (("false", False), ("'false'", False), ("true", True), ("auto", True), ("~", True))
    for choice, saved in choices:
        _, _, algo = pendulum([f"sac.checkpoint_replay={choice}"])
        buffer = {id(v) for v in algo.replay.variables}
        tracked = tf.train.Checkpoint(algo=algo).algo.variables
        assert any(id(v) in buffer for v in tracked) == saved, choice


@pytest.mark.parametrize("fixed_alpha", [False, True])
@pytest.mark.slow  # Out of the default suite: 20 s on 2 busy cores (2026-12-06).
def test_an_update_in_graph_mode_and_under_xla_gives_the_same_networks(fixed_alpha):
    # The same experience in both (graph mode; the environments' resets draw other floats
    # under XLA), then one update of 4 gradient steps with each.
    overrides = ["sac.train_freq=1000", "sac.gradient_steps=4", "sac.learning_starts=32"]
    overrides += ["sac.n_step=2", "sac.tau=0.5"]
    if fixed_alpha:
        overrides.append("sac.ent_coef=0.1")
    results = []
    for jit_compile in (False, True):
        _, env, algo = pendulum(overrides)
        run(env, algo, 48)
        assert int(algo.updates) == 0 and int(algo.replay.size()) == 4 * 47
        tf.function(algo.update, jit_compile=jit_compile)()
        assert int(algo.updates) == 4
        variables = algo.actor.variables + algo.critic.variables + algo.target_critic.variables
        results.append([v.numpy() for v in variables] + [np.float32(algo.log_alpha)])
    for graph, xla in zip(*results):
        np.testing.assert_allclose(graph, xla, rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # Out of the default suite: 13 s on 2 busy cores (2026-12-06).
def test_a_resumed_run_continues_exactly_with_the_buffer_checkpointed(tmp_path):
    overrides = [
        "env.backend=tensorflow",
        "env.num_envs=4",
        "network.policy_layers=[16]",
        "network.value_layers=[16]",
        "sac.buffer_size=2000",
        "sac.batch_size=16",
        "sac.learning_starts=64",
        "sac.train_freq=8",
        "sac.gradient_steps=4",
        "train.steps_per_call=64",
        "train.checkpoint_every=256",
        "train.eval_every=0",
    ]  # No schedule of SAC depends on train.total_steps.
    whole = load_run_config("pendulum_sac", [*overrides, "train.total_steps=1024"])
    train(whole, tmp_path / "whole", progress=quiet)
    half = load_run_config("pendulum_sac", [*overrides, "train.total_steps=512"])
    train(half, tmp_path / "resumed", progress=quiet)
    train(whole, tmp_path / "resumed", progress=quiet)
    weights = []
    for name in ("whole", "resumed"):
        _, env, algo = pendulum(overrides[1:])
        checkpoint = tf.train.Checkpoint(algo=algo)
        path = tf.train.latest_checkpoint(str(tmp_path / name / "checkpoints"))
        checkpoint.restore(path).expect_partial()
        assert int(algo.env_steps) == 1024 and int(algo.updates) == 4 * (1024 // 32 - 1)
        variables = algo.actor.variables + algo.critic.variables + algo.target_critic.variables
        weights.append([v.numpy() for v in variables] + [algo.log_alpha.numpy()])
    for a, b in zip(*weights):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow  # 35 to 65 s: five seeds trained one after another.
def test_pendulum_learns_with_small_networks_in_10000_steps(tmp_path):
    """pendulum_sac_tf (the zoo's settings, one XLA program per call) with networks of
    [64, 64] and batches of 128: the final evaluation, 16 episodes on Gymnasium's
    Pendulum-v1, is -200 or better on at least 4 of seeds 0 to 4 after 10,000 steps.

    Measured on a shared 2-core machine, 4 to 9 s a seed as its load varied (the first
    seed compiles, later ones load XLA's cache): seeds 0 to 9 scored -129.7, -149.4,
    -148.6, -172.1, -172.8, -173.4, -152.8, -160.6, -173.9 and -172.4 (10 of 10). After
    8,000 steps they scored -134.9, -143.1, -133.8, -133.6, -126.6, -120.4, -133.5,
    -267.8, -126.4 and -127.9 (9 of 10). Evaluations every 1,000 steps on the port
    (seeds 0 to 9) were -981 to -1,778 at 2,000 steps and -117 to -841 between 4,000 and
    8,000: not yet settled.
    """
    overrides = [
        "network.policy_layers=[64, 64]",
        "network.value_layers=[64, 64]",
        "sac.batch_size=128",
        "train.total_steps=10000",
        "train.eval_every=10000",
        "train.checkpoint_every=10000",
    ]
    returns = []
    for seed in range(5):
        config = load_run_config("pendulum_sac_tf", [*overrides, f"train.seed={seed}"])
        result = train(config, tmp_path / str(seed), progress=quiet)
        assert result["step"] == 10000
        returns.append(result["eval_return"])
    assert sum(value >= -200 for value in returns) >= 4, returns


@pytest.mark.parametrize(
    "preset, env_id",
    [
        ("halfcheetah_sac", "HalfCheetah-v5"),
        ("hopper_sac", "Hopper-v5"),
        ("walker_sac", "Walker2d-v5"),
    ],
)
def test_mujoco_presets_train_their_networks_end_to_end(tmp_path, preset, env_id):
    """The MuJoCo presets, cut down to 256 steps with their 256-unit networks: the warm-up,
    128 gradient steps, an evaluation of episodes cut at 64 steps, a checkpoint, and the
    exported policy's actions in the bounds."""
    overrides = [
        "sac.buffer_size=1000",
        "sac.learning_starts=128",
        "env.eval_envs=1",
        "env.max_episode_steps=64",
        "train.total_steps=256",
        "train.steps_per_call=128",
        "train.eval_every=256",
        "train.eval_episodes=1",
        "train.checkpoint_every=256",
    ]
    config = load_run_config(preset, overrides)
    assert config.env.id == env_id and config.network.policy_layers == (256, 256)
    result = train(config, tmp_path, progress=quiet)
    assert result["step"] == 256
    assert np.isfinite(result["eval_return"])
    space = gym.make(env_id).action_space
    policy = tf.saved_model.load(str(tmp_path / "policy"))
    observ = np.zeros((2,) + gym.make(env_id).observation_space.shape, np.float32)
    action = policy(observ).numpy()
    assert action.shape == (2,) + space.shape
    assert np.all(action >= space.low) and np.all(action <= space.high)
