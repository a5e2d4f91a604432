"""Tests of the bridge between Python environments and the graph."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from batchrl.testing import MockEnvironment
from batchrl.tools.batch_env import BatchEnv
from batchrl.tools.in_graph_batch_env import InGraphBatchEnv
from tests.tools._envs import CountEnv, WrongShapeEnv


class NanEnv(MockEnvironment):
    """Returns a NaN observation on its second step."""

    def step(self, action):
        observ, reward, terminated, truncated, info = super().step(action)
        if self.steps[-1] == 2:
            observ = observ * np.nan
        return observ, reward, terminated, truncated, info


def test_step_and_reset_inside_function():
    envs = [gym.make("Pendulum-v1") for _ in range(3)]
    env = InGraphBatchEnv(BatchEnv(envs, blocking=True), seed=5)
    observ = tf.function(lambda: env.reset())()
    assert observ.shape == (3, 3) and observ.dtype == tf.float32
    action = tf.zeros([3, 1])
    next_observ, reward, terminated, truncated = tf.function(env.step)(action)
    np.testing.assert_array_equal(env.observ.numpy(), next_observ.numpy())
    assert reward.dtype == tf.float32 and terminated.dtype == tf.bool
    assert not env.done.numpy().any()
    np.testing.assert_array_equal(env.episode_length.numpy(), [1, 1, 1])
    # The same seed gives the same start states as Gymnasium seeded directly.
    reference = gym.make("Pendulum-v1")
    reference.reset(seed=6)
    np.testing.assert_allclose(observ.numpy()[1], reference.reset()[0], rtol=1e-6)


def test_reset_of_some_indices_leaves_others():
    envs = [MockEnvironment(min_duration=9, max_duration=9) for _ in range(3)]
    env = InGraphBatchEnv(BatchEnv(envs, blocking=True))
    env.reset()
    env.step(tf.zeros([3, 1]))
    env.step(tf.zeros([3, 1]))
    env.reset(tf.constant([1]))
    np.testing.assert_array_equal(env.observ.numpy()[:, 0], [2, 0, 2])
    np.testing.assert_array_equal(env.episode_length.numpy(), [2, 0, 2])
    np.testing.assert_array_equal(env.episode_return.numpy(), [3, 0, 3])
    assert env.reset(tf.zeros([0], tf.int32)).shape == (0, 2)


def test_reset_where_equals_reset_of_its_indices():
    """`reset_where` of an environment without `_reset_where` resets by indices."""
    batches = []
    for reset in ("indices", "mask"):
        envs = [MockEnvironment(min_duration=9, max_duration=9) for _ in range(4)]
        env = InGraphBatchEnv(BatchEnv(envs, blocking=True))
        env.reset()
        env.step(tf.zeros([4, 1]))
        env.step(tf.zeros([4, 1]))
        if reset == "indices":
            env.reset(tf.constant([1, 3]))
        else:
            env.reset_where(tf.constant([False, True, False, True]))
        batches.append(env)
    for name in ("observ", "reward", "terminated", "truncated", "done", "episode_return"):
        by_indices, by_mask = (getattr(env, name).numpy() for env in batches)
        np.testing.assert_array_equal(by_mask, by_indices, err_msg=name)
    np.testing.assert_array_equal(batches[1].episode_length.numpy(), [2, 0, 2, 0])
    np.testing.assert_array_equal(batches[1].observ.numpy()[:, 0], [2, 0, 2, 0])


def test_non_finite_observation_names_the_environment():
    envs = [MockEnvironment(min_duration=9, max_duration=9), NanEnv(min_duration=9, max_duration=9)]
    env = InGraphBatchEnv(BatchEnv(envs, blocking=True))
    step = tf.function(env.step)
    env.reset()
    step(tf.zeros([2, 1]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="Environment 1 returned a non-finite"):
        step(tf.zeros([2, 1]))


def test_discrete_actions_are_int32():
    envs = [gym.make("CartPole-v1") for _ in range(2)]
    env = InGraphBatchEnv(BatchEnv(envs, blocking=True), seed=0)
    assert env.action.dtype == tf.int32
    env.reset()
    env.step(tf.constant([0, 1]))
    np.testing.assert_array_equal(env.action.numpy(), [0, 1])


def test_rejects_unsupported_observation_space():
    class DiscreteObserv(MockEnvironment):
        def __init__(self):
            super().__init__()
            self.observation_space = gym.spaces.Discrete(4)

    with pytest.raises(ValueError, match="Unsupported observation space Discrete"):
        InGraphBatchEnv(BatchEnv([DiscreteObserv()], blocking=True))


def test_step_runs_after_a_reset_inside_cond():
    # Episodes of one step: every step needs the reset before it. The actions are constants,
    # so only the environment itself can order its step after the reset in the cond.
    envs = [MockEnvironment(min_duration=1, max_duration=1) for _ in range(2)]
    env = InGraphBatchEnv(BatchEnv(envs, blocking=True))

    def reset():
        env.reset()

    @tf.function
    def reset_and_step():
        tf.cond(tf.reduce_any(env.done), reset, lambda: None)
        return env.step(tf.zeros([2, 1]))

    for _ in range(100):
        reset_and_step()
    assert [e.steps for e in envs] == [[1] * 100] * 2


@pytest.mark.parametrize("kwargs", [dict(observ_shape=(4,)), dict(reward_shape=(2,))])
def test_wrong_shapes_name_the_environment_instead_of_failing_in_the_graph(kwargs):
    env = InGraphBatchEnv(BatchEnv([CountEnv(), WrongShapeEnv(**kwargs)], blocking=True))
    env.reset()
    with pytest.raises(tf.errors.InvalidArgumentError, match="Environment 1 returned an? "):
        tf.function(env.step)(tf.constant([0, 0]))
