"""Tests of recurrent IMPALA (network.core): state carried across unrolls, reset at
episode starts, the learner's unroll against steps, config checks, short runs."""

import functools

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from batchrl.algorithms import IMPALA
from batchrl.config import ConfigError, load_run_config, save_config
from batchrl.config.run_config import check_run_config, load_saved_run_config
from batchrl.runners import train
from batchrl.runners.threads import ActorLearner
from batchrl.runners.unrolls import Unroll, UnrollCollector, concatenate
from batchrl.testing.mock_environment import MockEnvironment
from batchrl.tools.batch_env import BatchEnv
from batchrl.tools.environments import EnvSpaces, make_batch_env
from batchrl.tools.in_graph_batch_env import InGraphBatchEnv
from batchrl.tools.simulate import simulate
from batchrl.training import PolicyEvaluator
from tests.algorithms.ppo.test_recurrent import LENGTH as CUE_LENGTH
from tests.algorithms.ppo.test_recurrent import Cue

CORE = ["network.core=lstm", "network.core_size=8", "network.policy_layers=[16]"]


def config(overrides=()):
    return load_run_config("debug_impala", [*CORE, *overrides])


def mock_envs():
    """Environment 0 runs episodes of 3 steps (truncated), environment 1 of 2 (terminated)."""
    return [
        MockEnvironment((1,), gym.spaces.Discrete(2), 3, 3, truncate=True),
        MockEnvironment((1,), gym.spaces.Discrete(2), 2, 2, truncate=False),
    ]


def close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_synchronous_core_state_is_carried_across_unrolls_and_reset_at_episode_starts():
    """T=4 with the mock environments (episodes start at steps 0, 3, 6 and 0, 2, 4, 6):

    step        0  1  2  3 | 4  5  6  7
    first, 0    1  0  0  1 | 0  0  1  0     unroll 1 starts mid-episode: carried
    first, 1    1  0  1  0 | 1  0  1  0     unroll 1 starts an episode: zeros
    """
    env = InGraphBatchEnv(BatchEnv(mock_envs(), blocking=True), seed=0)
    algo = IMPALA(env, config(["impala.unroll_length=4"]))
    run = functools.partial(simulate, env, algo)  # Eagerly: quicker than tracing.
    run(steps=4)
    np.testing.assert_array_equal(algo._unroll_state, np.zeros([2, algo.policy.state_size]))
    final = algo._state.numpy()  # After step 3 (agent 1's episode ended there).
    assert np.abs(final[0]).sum() > 0
    run(steps=4)
    start = algo._unroll_state.numpy()  # What unroll 1 started from.
    np.testing.assert_array_equal(start[0], final[0])
    np.testing.assert_array_equal(start[1], np.zeros(algo.policy.state_size))
    np.testing.assert_array_equal(
        algo.rollout.data["first"].numpy().T, [[0, 0, 1, 0], [1, 0, 1, 0]]
    )
    assert int(algo.optimizer.iterations) == 2


def test_core_states_survive_a_checkpoint(tmp_path):
    """Mid-unroll (step 6 of T=4, 2 steps in), the carried states, the episode-start flags
    and the unroll's start states restore into a fresh IMPALA."""
    env = InGraphBatchEnv(BatchEnv(mock_envs(), blocking=True), seed=0)
    algo = IMPALA(env, config(["impala.unroll_length=4"]))
    simulate(env, algo, steps=6)  # Eagerly: quicker than tracing for 6 steps.
    path = tf.train.Checkpoint(algo=algo).save(str(tmp_path / "ckpt"))
    fresh = IMPALA(env, config(["impala.unroll_length=4"]))
    tf.train.Checkpoint(algo=fresh).restore(path).assert_existing_objects_matched()
    for name in ("_state", "_first", "_unroll_state"):
        np.testing.assert_array_equal(getattr(fresh, name), getattr(algo, name))
    assert np.abs(algo._state.numpy()).sum() > 0 and np.abs(algo._unroll_state.numpy()).sum() > 0
    for a, b in zip(fresh.policy.variables, algo.policy.variables, strict=True):
        np.testing.assert_array_equal(a, b)


def reference_outputs(algo, unroll):
    """Logits and values of the policy network, one step at a time with TorchBeast's
    reset s * (1 - first) before each step, and the state after the last step. With
    last-action and last-reward inputs each step writes its sampled action and its
    (clipped) reward into the state."""
    state = unroll["core_state"]
    logits, values = [], []
    for t in range(unroll["observ"].shape[0]):
        state = state * (1 - unroll["first"][t][:, None]).astype(np.float32)
        output, value, state = algo.policy(tf.constant(unroll["observ"][t]), tf.constant(state))
        state = algo.policy.with_last_action(state, tf.constant(unroll["sample"][t]))
        state = algo.policy.with_last_reward(state, tf.constant(unroll["reward"][t])).numpy()
        logits.append(output.numpy())
        values.append(value.numpy())
    return np.stack(logits), np.stack(values), state


# Rewards unclipped and unnormalized: the mock environments' rewards 1, 2, 3 stay apart.
REWARDS = ["impala.reward_clipping=none", "impala.normalize_reward=false"]


@pytest.mark.parametrize(
    "inputs", ["[]", "[last_action]", "[last_reward]", "[last_action, last_reward]"]
)
def test_actor_unrolls_carry_the_state_and_the_learner_replays_them_step_by_step(inputs):
    """An actor's `UnrollCollector` with the recurrent behaviour policy, T=5: unroll k+1
    starts from the state unroll k ended in (stepped here one step at a time from unroll
    k's stored start), zeros where an episode starts; the learner's logits and values
    over the unroll equal the step-by-step reference. With the last action (or reward)
    as an input, the learner takes it from the unroll's samples (rewards) shifted by one
    step (step 0's from the start state, zeros at episode starts, which fall mid-unroll
    here)."""
    cfg = config(
        [
            "runner.name=threads",
            "impala.unroll_length=5",
            "impala.normalize_observ=false",
            f"network.core_inputs={inputs}",
            *REWARDS,
        ]
    )
    batch_env = BatchEnv(mock_envs(), blocking=True)
    algo = IMPALA(batch_env, cfg)
    policy = algo.make_behaviour_policy(seed=0)
    policy.load([v.numpy() for v in algo.behaviour_variables()])
    collector = UnrollCollector(batch_env, seed=0)
    unrolls = [collector.unroll(policy, 5)[0] for _ in range(3)]
    collector.close()
    # Episodes start at steps 0, 3, 6, 9, 12 (env 0) and every other step (env 1).
    first = np.zeros((15, 2), bool)
    first[::3, 0] = first[::2, 1] = True
    for k, unroll in enumerate(unrolls):
        np.testing.assert_array_equal(unroll["first"], first[5 * k : 5 * k + 5])
        assert unroll["core_state"].shape == (2, policy.policy.state_size)
        logits, values, state = reference_outputs(algo, unroll)
        close(unroll["output"], logits)  # The actor acted with the same network.
        _, info = algo.loss({key: tf.constant(value) for key, value in unroll.items()})
        close(info["value"], values)
        close(info["log_rhos"], np.zeros((5, 2)))  # Same weights: pi = mu.
        if k + 1 < len(unrolls):
            ended = unroll["terminated"][-1] | unroll["truncated"][-1]
            state = np.where(ended[:, None], 0.0, state)
            close(unrolls[k + 1]["core_state"], state)
    np.testing.assert_array_equal(unrolls[0]["core_state"], 0.0)  # The first episodes.
    np.testing.assert_array_equal(unrolls[2]["core_state"][1], 0.0)  # Starts at step 10.
    assert np.abs(unrolls[1]["core_state"][0]).sum() > 0  # Mid-episode at step 5.
    carried = unrolls[1]["core_state"][0]  # Env 0 after step 4, mid-episode.
    actions = 2 if "last_action" in inputs else 0
    rewards = 1 if "last_reward" in inputs else 0
    assert policy.policy.state_size == 16 + actions + rewards
    if actions:  # The state holds the one-hot of step 4's action.
        np.testing.assert_array_equal(
            carried[16 : 16 + actions], np.eye(2)[unrolls[0]["sample"][-1, 0]]
        )
    if rewards:  # And ends in step 4's reward (2: the second step of its episode).
        assert carried[-1] == unrolls[0]["reward"][-1, 0] == 2.0


def test_concatenated_unrolls_join_their_states_along_the_batch():
    cfg = config(["runner.name=threads", "impala.unroll_length=3"])
    batch_env = BatchEnv(mock_envs(), blocking=True)
    policy = IMPALA(batch_env, cfg).make_behaviour_policy(seed=0)
    collector = UnrollCollector(batch_env, seed=0)
    first, second = collector.unroll(policy, 3)[0], collector.unroll(policy, 3)[0]
    collector.close()
    batch = concatenate([Unroll(first, 0, 0), Unroll(second, 1, 0)])
    assert batch["core_state"].shape == (4, policy.policy.state_size)
    assert batch["first"].shape == (3, 4)
    assert batch["observ"].shape == (3, 4, 1)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["network.core_size=0"], r"network.core_size=0; it must be > 0"),
        (["network.core=transformer"], r"network.core.*'none', 'gru', 'lstm'"),
        (["algorithm.name=ppo"], r"network.core='lstm' is built by IMPALA only"),
        (["network.core_inputs=[last_actions]"], r"network.core_inputs='last_actions'"),
        (
            ["network.core_inputs=[last_reward]"],
            r"core_inputs=\['last_reward'\] with impala.normalize_reward=true",
        ),
        (["network.core_inputs=[last_action, last_action]"], r"names an input twice"),
        (
            ["network.core=none", "network.core_inputs=[last_action]"],
            r"inputs of the recurrent core: set network.core",
        ),
    ],
)
def test_config_errors(overrides, message):
    with pytest.raises(ConfigError, match=message):
        check_run_config(config(overrides))


def test_last_action_inputs_need_discrete_actions():
    envs = [MockEnvironment((1,), None, 3, 3)]  # Box actions.
    with pytest.raises(ConfigError, match=r"core_inputs=\['last_action'\].*Discrete"):
        IMPALA(BatchEnv(envs, blocking=True), config(["network.core_inputs=[last_action]"]))


@pytest.mark.parametrize("inputs", ["[last_action]", "[last_action, last_reward]"])
def test_synchronous_learner_replays_the_last_actions_it_acted_with(inputs):
    """The in-graph path (`perform`, `experience`, `update`), T=4 with episodes ending
    mid-unroll: the learner's logits over each unroll equal those that acted (the
    learning rate is 0, so the weights stay those that acted), and each agent's state
    holds the one-hot of its latest sample (and ends in its latest reward)."""
    overrides = [
        "impala.unroll_length=4",
        "impala.learning_rate=0",
        "impala.normalize_observ=false",
        f"network.core_inputs={inputs}",
        *REWARDS,
    ]
    env = InGraphBatchEnv(BatchEnv(mock_envs(), blocking=True), seed=0)
    algo = IMPALA(env, config(overrides))
    for _ in range(2):
        simulate(env, algo, steps=4)  # Eagerly: quicker than tracing.
        unroll = dict(algo.rollout.read(), core_state=algo._unroll_state.read_value())
        _, info = algo.loss(unroll)
        close(info["log_rhos"], np.zeros((4, 2)))
        close(
            reference_outputs(algo, {k: v.numpy() for k, v in unroll.items()})[0], unroll["output"]
        )
        np.testing.assert_array_equal(algo._state[:, 16:18], np.eye(2)[unroll["sample"][-1]])
        if "last_reward" in inputs:
            np.testing.assert_array_equal(algo._state[:, -1], unroll["reward"][-1])


def test_a_checkpoint_and_config_made_without_core_inputs_restore(tmp_path):
    """A run's config.yaml written before `network.core_inputs` existed loads with the
    key's default (no inputs, with a warning), and a checkpoint of the recurrent IMPALA
    it describes restores into the IMPALA built from it."""
    cfg = config(["impala.unroll_length=4"])
    save_config(cfg, tmp_path / "config.yaml")
    text = (tmp_path / "config.yaml").read_text()
    old = "\n".join(line for line in text.splitlines() if "core_inputs" not in line)
    assert old != text
    (tmp_path / "config.yaml").write_text(old)
    with pytest.warns(UserWarning, match="core_inputs"):
        loaded = load_saved_run_config(tmp_path / "config.yaml")
    assert tuple(loaded.network.core_inputs) == ()
    env = InGraphBatchEnv(BatchEnv(mock_envs(), blocking=True), seed=0)
    algo = IMPALA(env, cfg)
    simulate(env, algo, steps=2)
    path = tf.train.Checkpoint(algo=algo).save(str(tmp_path / "ckpt"))
    fresh = IMPALA(env, loaded)
    tf.train.Checkpoint(algo=fresh).restore(path).assert_existing_objects_matched()
    np.testing.assert_array_equal(fresh._state, algo._state)
    for a, b in zip(fresh.policy.variables, algo.policy.variables, strict=True):
        np.testing.assert_array_equal(a, b)


def quiet(*_, **__):
    pass


@pytest.mark.parametrize("inputs", ["[]", "[last_reward]"])
def test_cartpole_trains_end_to_end_and_exports_a_recurrent_policy(tmp_path, inputs):
    """The debug preset on CartPole-v1 with an LSTM core for 448 steps: it trains,
    checkpoints, evaluates with the state carried per environment, and exports a policy
    of (observ, state) whose `observe_reward` writes a step's rewards into the states
    when the core reads the last reward (clipped to [-1, 1], `abs_one`)."""
    overrides = ["env.id=CartPole-v1", "train.total_steps=448", f"network.core_inputs={inputs}"]
    cfg = config([*overrides, "impala.normalize_reward=false", "impala.reward_clipping=abs_one"])
    result = train(cfg, tmp_path, progress=quiet)
    assert result["step"] == 448
    assert np.isfinite(result["eval_return"])
    policy = tf.saved_model.load(str(tmp_path / "policy"))
    state = policy.initial_state(3)
    size = 16 + (inputs == "[last_reward]")  # [h, c] of 8 units each, and the reward.
    assert state.shape == (3, size)
    out = policy(np.zeros((3, 4), np.float32), state)
    assert out["state"].shape == (3, size) and out["action"].shape == (3,)
    observed = policy.observe_reward(out["state"], np.array([0.5, 3.0, -2.0], np.float32))
    if inputs == "[last_reward]":
        np.testing.assert_array_equal(observed[:, -1], [0.5, 1.0, -1.0])
        np.testing.assert_array_equal(observed[:, :-1], out["state"][:, :-1])
    else:
        np.testing.assert_array_equal(observed, out["state"])


def test_evaluation_carries_the_last_reward_in_the_state():
    """`PolicyEvaluator` with a core that reads the last reward: after each step each
    agent's state ends in the reward the step gave (the mock environments' 1, 2, 3)."""
    cfg = config(["network.core_inputs=[last_reward]", *REWARDS])
    env = InGraphBatchEnv(BatchEnv(mock_envs(), blocking=True), seed=0)
    evaluator = PolicyEvaluator(IMPALA(env, cfg), 2)
    simulate(env, evaluator, steps=1)
    np.testing.assert_array_equal(evaluator._state[:, -1], [1.0, 1.0])
    simulate(env, evaluator, steps=1)
    np.testing.assert_array_equal(evaluator._state[:, -1], [2.0, 2.0])


@pytest.mark.slow  # About 5 s.
def test_cartpole_learns_with_an_lstm_core(tmp_path):
    """20,480 steps (the learning rate annealed over them) reach a mean evaluation return
    of 100 over 16 episodes. Seeds 0, 1 and 2 evaluated 185, 215 and 138 here
    (2026-11-26); a random policy scores about 22."""
    overrides = [
        "network.core=lstm",
        "network.core_size=32",
        "train.total_steps=20480",
        "train.eval_every=20480",  # One evaluation, at the end.
        "train.eval_episodes=16",
        "env.eval_envs=8",
    ]
    result = train(load_run_config("cartpole_impala", overrides), tmp_path, progress=quiet)
    assert result["eval_return"] >= 100, result


def test_threads_runner_learns_from_recurrent_unrolls():
    """Two actors, one with its own copy and both through dynamic batching: updates run
    on batches that carry each unroll's start states."""
    for inference in ("actor", "dynamic"):
        cfg = config(["runner.name=threads", "threads.num_actors=2", "env.id=CartPole-v1"])
        algo = IMPALA(EnvSpaces(cfg.env, cfg.env.num_envs), cfg)
        runner = ActorLearner(
            functools.partial(make_batch_env, cfg.env, cfg.env.num_envs),
            algo,
            num_actors=2,
            unroll_length=cfg.impala.unroll_length,
            learner_batch=2,
            unroll_timeout=60,
            inference=inference,
        )
        with runner:
            for _ in range(3):
                steps, _ = runner.update()
                assert steps == 2 * 16 * 2
            unroll = runner.next_unroll()
        assert unroll.arrays["core_state"].shape == (2, 16)
        assert unroll.arrays["first"].shape == (16, 2)
        assert int(algo.optimizer.iterations) == 3


def train_on_cue(core, iterations=60):
    """IMPALA on recurrent PPO's cue task (a cue in the first of 4 steps; the last action
    must repeat it): 32 environments, T=16 (4 episodes an unroll), one update a call."""
    tf.keras.utils.set_random_seed(0)
    overrides = [
        "algorithm.name=impala",
        f"network.core={core}",
        "network.core_size=16",
        "network.policy_layers=[16]",
        "network.value_layers=[16]",
        "impala.unroll_length=16",
        "impala.optimizer=adam",
        "impala.learning_rate=3e-3",
        "impala.normalize_reward=false",
        "impala.discount=1.0",
        "impala.entropy_cost=0.01",
        "train.steps_per_call=16",
    ]
    env = Cue(32)
    algo = IMPALA(env, load_run_config("default", overrides), seed=0)
    call = tf.function(lambda: simulate(env, algo, steps=16))
    for _ in range(iterations):
        call()
    evaluator = PolicyEvaluator(algo, 32)
    evaluation = tf.function(lambda: simulate(env, evaluator, reset=True, steps=CUE_LENGTH))
    return float(evaluation()["mean_return"])


@pytest.mark.slow  # About 2 to 4 s; the pair moved out of the default suite for its budget.
def test_lstm_core_remembers_the_cue():
    """Seeds 0 to 3 evaluated 1.0 after 60 updates (2026-11-26; 0.66 to 1.0 after 30)."""
    assert train_on_cue("lstm") == 1.0


@pytest.mark.slow
def test_feedforward_impala_cannot_remember_the_cue():
    """The control of the test above."""
    assert train_on_cue("none") <= 0.75  # 0.44 after 60 updates; at best 0.5 expected.
