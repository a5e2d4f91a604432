"""EpisodeRecorder records each agent's first episode, in graph mode and under XLA."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from batchrl.core import Algorithm
from batchrl.tools.batch_env import BatchEnv
from batchrl.tools.environments import make_tensorflow_env, restart_streams
from batchrl.tools.episodes import EpisodeRecorder
from batchrl.tools.in_graph_batch_env import InGraphBatchEnv
from batchrl.tools.simulate import simulate
from batchrl.training.evaluation import Evaluation
from batchrl.training.policy_evaluator import PolicyEvaluator
from tests.tools._in_graph_envs import Countdown

BATCH = 300


class Idle(Algorithm):
    def begin_episodes(self, agent_indices):
        pass

    def perform(self, agent_indices, observ):
        return tf.zeros_like(agent_indices)

    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        pass

    def end_episodes(self, agent_indices):
        pass


LENGTHS = np.arange(BATCH) % 97 + 1
RETURNS = LENGTHS * (1 + np.arange(BATCH) % 3)


# Before the fix, end_episodes scattered through a boolean_mask'ed index list, and under XLA
# only 52 (one loop) and 71 (several calls) of the 300 first episodes were recorded.
@pytest.mark.parametrize("jit_compile", [False, True])
def test_first_episodes_in_one_loop(jit_compile):
    env = Countdown(np.arange(BATCH) % 97 + 1, 1 + np.arange(BATCH) % 3)
    recorder = EpisodeRecorder(Idle(), BATCH)

    def run():
        def body(t):
            simulate(env, recorder, reset=tf.equal(t, 0), steps=1)
            return t + 1

        tf.while_loop(lambda t: t < 120, body, [tf.constant(0)], parallel_iterations=1)

    recorder.clear()
    tf.function(run, jit_compile=jit_compile)()
    assert recorder.finished.numpy().all()
    np.testing.assert_array_equal(recorder.lengths.numpy(), LENGTHS)
    np.testing.assert_array_equal(recorder.returns.numpy(), RETURNS)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_first_episodes_over_several_calls(jit_compile):
    env = Countdown(np.arange(BATCH) % 97 + 1, 1 + np.arange(BATCH) % 3)
    recorder = EpisodeRecorder(Idle(), BATCH)
    call = tf.function(
        lambda reset: simulate(env, recorder, reset=reset, steps=16), jit_compile=jit_compile
    )
    recorder.clear()
    call(tf.constant(True))
    returns, lengths = recorder.first_episodes()
    # After 16 steps, episodes of up to 16 steps are recorded; the others count as they are.
    np.testing.assert_array_equal(lengths.numpy(), np.minimum(LENGTHS, 16))
    np.testing.assert_array_equal(returns.numpy(), np.minimum(LENGTHS, 16) * (RETURNS // LENGTHS))
    for _ in range(6):
        call(tf.constant(False))
    assert recorder.finished.numpy().all()
    np.testing.assert_array_equal(recorder.lengths.numpy(), LENGTHS)
    np.testing.assert_array_equal(recorder.returns.numpy(), RETURNS)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_evaluation_means_first_episodes_of_each_round(jit_compile):
    env = Countdown(np.arange(BATCH) % 97 + 1, 1 + np.arange(BATCH) % 3)
    # Two rounds of 300 episodes; under XLA each round is one call.
    evaluation = Evaluation(env, Idle(), 2 * BATCH, steps_per_call=16, jit_compile=jit_compile)
    result = evaluation.run()
    assert result["episodes"] == 2 * BATCH
    np.testing.assert_allclose(result["mean_length"], LENGTHS.mean())
    np.testing.assert_allclose(result["mean_return"], RETURNS.mean())


def test_compiled_evaluation_stops_at_max_steps():
    env = Countdown(np.arange(BATCH) % 97 + 1, 1 + np.arange(BATCH) % 3)
    evaluation = Evaluation(env, Idle(), BATCH, steps_per_call=8, jit_compile=True, max_steps=16)
    result = evaluation.run()
    # Two calls of 8 steps: longer episodes count with their first 16 steps.
    np.testing.assert_allclose(result["mean_length"], np.minimum(LENGTHS, 16).mean())
    np.testing.assert_allclose(
        result["mean_return"], (np.minimum(LENGTHS, 16) * (RETURNS // LENGTHS)).mean()
    )


class _Damping(tf.Module):
    """A deterministic policy for Pendulum: torque against the angular velocity."""

    def act(self, observ, deterministic=True):
        return tf.clip_by_value(-observ[:, 2:], -2.0, 2.0)  # [B, 1]


def _pendulums(backend):
    if backend == "tensorflow":
        return make_tensorflow_env("Pendulum-v1", 2, seed=5)
    envs = [gym.make("Pendulum-v1") for _ in range(2)]
    return InGraphBatchEnv(BatchEnv(envs, blocking=True), seed=5)


@pytest.mark.parametrize("backend", ["tensorflow", "gymnasium"])
def test_evaluations_with_one_seed_give_one_return_whatever_ran_before(backend):
    """As a resumed run's fresh environments and an uninterrupted run's used ones do."""
    policy = _Damping()

    def evaluate(env, seed):
        evaluation = Evaluation(env, PolicyEvaluator(policy, len(env)), episodes=4)
        restart_streams(env, seed)
        return evaluation.run()["mean_return"]

    fresh, used = _pendulums(backend), _pendulums(backend)
    try:
        expected = evaluate(fresh, 7)
        evaluate(used, 3)  # Earlier evaluations of an uninterrupted run.
        assert evaluate(used, 7) == expected
        assert evaluate(used, 8) != expected  # The seed matters.
    finally:
        for env in (fresh, used):
            if hasattr(env, "close"):  # Gymnasium's.
                env.close()
