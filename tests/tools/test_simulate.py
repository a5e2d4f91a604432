"""Exact tests of simulate over mock environments with known episode lengths."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from batchrl.core import Algorithm
from batchrl.testing import MockAlgorithm, MockEnvironment
from batchrl.tools.batch_env import BatchEnv
from batchrl.tools.in_graph_batch_env import InGraphBatchEnv
from batchrl.tools.simulate import simulate
from tests.tools._in_graph_envs import Countdown


def make_env(durations, truncate=False):
    envs = [MockEnvironment(min_duration=d, max_duration=d, truncate=truncate) for d in durations]
    return envs, InGraphBatchEnv(BatchEnv(envs, blocking=True))


def make_algo(env, seed=0):
    return MockAlgorithm(env.observation_space, env.action_space, seed=seed)


def as_lists(arrays):
    return [sorted(np.asarray(a).tolist()) for a in arrays]


# Three environments with episodes of 2, 3 and 4 steps. Per step t (1-based), the step
# count of each environment's episode after stepping, * marking an episode that ends:
#
#   t       1  2   3   4   5  6   7  8   9
#   env 0   1  2*  1   2*  1  2*  1  2*  1
#   env 1   1  2   3*  1   2  3*  1  2   3*
#   env 2   1  2   3   4*  1  2   3  4*  1
#
# begin_episodes receives the environments that ended in the step before (all at t=1),
# at t = 1, 3, 4, 5, 7, 9; end_episodes those that end, at t = 2, 3, 4, 6, 8, 9. Neither
# is called with an empty list.
BEGUN = [[0, 1, 2], [0], [1], [0, 2], [0, 1], [0, 2]]
ENDED = [[0], [1], [0, 2], [0, 1], [0, 2], [1]]
# Rewards are 1, 2, ..., so an episode of length L returns L * (L + 1) / 2: 3, 6 and 10.
ENDED_RETURNS = [3, 6, 3, 10, 3, 6, 3, 10, 6]
ENDED_LENGTHS = [2, 3, 2, 4, 2, 3, 2, 4, 3]


@pytest.mark.parametrize("in_function", [False, True])
def test_exact_timeline(in_function):
    envs, env = make_env([2, 3, 4])
    algo = make_algo(env)
    run = lambda: simulate(env, algo, steps=9)
    result = tf.function(run)() if in_function else run()
    assert as_lists(algo.records.begun) == BEGUN
    assert as_lists(algo.records.ended) == ENDED
    assert [e.steps for e in envs] == [[2, 2, 2, 2, 1], [3, 3, 3], [4, 4, 1]]
    assert int(result["episodes"]) == 9
    assert int(result["steps"]) == 27
    assert float(result["mean_return"]) == pytest.approx(np.mean(ENDED_RETURNS))
    assert float(result["mean_length"]) == pytest.approx(np.mean(ENDED_LENGTHS))
    assert int(algo.begin_calls) == 6
    assert int(algo.perform_calls) == 9
    assert int(algo.experience_calls) == 9
    assert int(algo.end_calls) == 6
    # experience sees the observation before and after each step: the step counts.
    _, observ, _, reward, terminated, truncated, next_observ = algo.records.experienced[1]
    np.testing.assert_array_equal(observ[:, 0], [1, 1, 1])
    np.testing.assert_array_equal(next_observ[:, 0], [2, 2, 2])
    np.testing.assert_array_equal(reward, [2, 2, 2])
    np.testing.assert_array_equal(terminated, [True, False, False])
    np.testing.assert_array_equal(truncated, [False, False, False])


def test_steps_in_one_call_equal_single_steps():
    _, env_a = make_env([2, 3, 4])
    algo_a = make_algo(env_a, seed=7)
    many = tf.function(lambda: simulate(env_a, algo_a, steps=9))()
    _, env_b = make_env([2, 3, 4])
    algo_b = make_algo(env_b, seed=7)
    single = tf.function(lambda: simulate(env_b, algo_b, steps=1))
    episodes = [int(single()["episodes"]) for _ in range(9)]
    assert sum(episodes) == int(many["episodes"])
    assert as_lists(algo_a.records.begun) == as_lists(algo_b.records.begun)
    assert as_lists(algo_a.records.ended) == as_lists(algo_b.records.ended)
    for rec_a, rec_b in zip(algo_a.records.experienced, algo_b.records.experienced):
        for a, b in zip(rec_a, rec_b):
            np.testing.assert_array_equal(a, b)
    assert len(algo_a.records.experienced) == len(algo_b.records.experienced) == 9


def test_reset_restarts_all_episodes_and_drops_them_from_statistics():
    envs, env = make_env([3, 3])
    algo = make_algo(env)
    step = tf.function(lambda reset: simulate(env, algo, reset=reset, steps=2))
    first = step(tf.constant(False))
    assert int(first["episodes"]) == 0
    assert np.isnan(float(first["mean_return"]))
    step(tf.constant(True))  # Both episodes are cut at 2 steps and restarted.
    assert [e.steps for e in envs] == [[2, 2], [2, 2]]
    assert as_lists(algo.records.begun) == [[0, 1], [0, 1]]
    assert as_lists(algo.records.ended) == []


def test_truncation_is_never_reported_as_termination():
    # MockEnvironment ends by truncation; TimeLimit cuts a long episode at 3 steps.
    env_a = MockEnvironment(min_duration=2, max_duration=2, truncate=True)
    env_b = gym.wrappers.TimeLimit(MockEnvironment(min_duration=50, max_duration=50), 3)
    env = InGraphBatchEnv(BatchEnv([env_a, env_b], blocking=True))
    algo = make_algo(env)
    tf.function(lambda: simulate(env, algo, steps=6))()
    terminated = np.stack([rec[4] for rec in algo.records.experienced])  # [T, B]
    truncated = np.stack([rec[5] for rec in algo.records.experienced])  # [T, B]
    assert not terminated.any()
    np.testing.assert_array_equal(truncated[:, 0], [0, 1, 0, 1, 0, 1])
    np.testing.assert_array_equal(truncated[:, 1], [0, 0, 1, 0, 0, 1])
    # The final observation of a truncated episode reaches experience before the reset.
    np.testing.assert_array_equal(algo.records.experienced[2][6][1], [3, 3])


def test_summaries_written_when_logging(tmp_path):
    _, env = make_env([2])
    algo = make_algo(env)
    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default(step=0):
        tf.function(lambda: simulate(env, algo, log=True, steps=4))()
    writer.flush()
    tags = set()
    for path in tmp_path.iterdir():
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            tags.update(value.tag for value in event.summary.value)
    assert {"simulate/mean_return", "simulate/mean_length", "simulate/episodes"} <= tags


def test_state_survives_checkpoint(tmp_path):
    _, env = make_env([2, 3])
    algo = make_algo(env)
    tf.function(lambda: simulate(env, algo, steps=4))()
    path = tf.train.Checkpoint(env=env, algo=algo).write(str(tmp_path / "ckpt"))
    _, env_b = make_env([2, 3])
    algo_b = make_algo(env_b, seed=99)
    tf.train.Checkpoint(env=env_b, algo=algo_b).read(path).assert_consumed()
    for a, b in zip(env.variables + algo.variables, env_b.variables + algo_b.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert int(algo_b.perform_calls) == 4


class Scheduled(Algorithm):
    """Updates after every `period` steps; logs, per update, the steps it had seen."""

    autograph = False

    def __init__(self, batch_size, period):
        super().__init__()
        self.period = period
        self.batch_size = batch_size
        self.steps = tf.Variable(0)  # experience calls so far
        self.since = tf.Variable(0)  # experience calls since the last update
        self.updates = tf.Variable(0)
        self.log = tf.Variable(tf.zeros([64], tf.int32))  # self.steps at each update

    def begin_episodes(self, agent_indices):
        pass

    def perform(self, agent_indices, observ):
        return tf.zeros_like(agent_indices)

    def experience(self, agent_indices, *transition):
        # Recording past the period would mean a step ran while an update was due.
        with tf.control_dependencies([tf.debugging.assert_less(self.since, self.period)]):
            self.steps.assign_add(1)
            self.since.assign_add(1)

    def end_episodes(self, agent_indices):
        pass

    def steps_to_update(self):
        return self.period - self.since.read_value()

    def update(self):
        self.log.scatter_nd_update([[self.updates.read_value()]], [self.steps.read_value()])
        self.updates.assign_add(1)
        self.since.assign(0)


@pytest.mark.parametrize("jit_compile", [False, True])
@pytest.mark.parametrize("steps_per_call", [1, 3, 7])
def test_scheduled_updates_run_right_after_the_step_that_completes_the_period(
    steps_per_call, jit_compile
):
    env = Countdown([2, 5])
    algo = Scheduled(len(env), period=3)
    call = tf.function(
        lambda: simulate(env, algo, steps=steps_per_call), jit_compile=jit_compile, autograph=False
    )
    for _ in range(21 // steps_per_call):
        call()
    assert int(algo.steps) == 21
    assert int(algo.updates) == 7
    assert algo.log.numpy()[:8].tolist() == [3, 6, 9, 12, 15, 18, 21, 0]
    assert int(algo.steps_to_update()) == 3


def test_scheduled_updates_with_a_tensor_step_count():
    env = Countdown([2, 5])
    algo = Scheduled(len(env), period=4)
    call = tf.function(lambda steps: simulate(env, algo, steps=steps))
    for steps in (3, 6, 1, 2):  # Updates at 4, 8 and 12 steps.
        call(tf.constant(steps))
    assert algo.log.numpy()[:4].tolist() == [4, 8, 12, 0]


@pytest.mark.parametrize("in_function", [False, True])
def test_statistics_of_members(in_function):
    # Member 0 owns environments 0 and 1 (episodes of 2 and 3 steps), member 1
    # environments 2 and 3 (4 and 2 steps). In 9 steps member 0 finishes 4 episodes
    # returning 3 and 3 returning 6, member 1 two returning 10 and 4 returning 3.
    _, env = make_env([2, 3, 4, 2])
    algo = make_algo(env)
    call = lambda: simulate(env, algo, steps=9, members=2)  # noqa: E731
    stats = tf.function(call)() if in_function else call()
    np.testing.assert_array_equal(stats["episodes"], [7, 6])
    np.testing.assert_allclose(stats["mean_return"], [30 / 7, 32 / 6], rtol=1e-6)
    np.testing.assert_allclose(stats["mean_length"], [17 / 7, 16 / 6], rtol=1e-6)
    with pytest.raises(ValueError, match="log=False"):
        simulate(env, algo, log=True, members=2)
