"""The order of environment and algorithm calls in simulate, also when actions ignore observ."""

import functools

import numpy as np
import pytest
import tensorflow as tf

from batchrl.core import Algorithm
from batchrl.envs.routing import Heuristic, Routing
from batchrl.testing import MockAlgorithm, MockEnvironment
from batchrl.tools.batch_env import BatchEnv
from batchrl.tools.external_process import ExternalProcess
from batchrl.tools.in_graph_batch_env import InGraphBatchEnv
from batchrl.tools.simulate import simulate

pytestmark = pytest.mark.usefixtures("no_new_children")


class ZeroAlgorithm(MockAlgorithm):
    """Acts with zeros: the action has no data dependency on the observation or a reset."""

    def perform(self, agent_indices, observ):
        self.perform_calls.assign_add(1)
        return tf.zeros([tf.shape(agent_indices)[0], 1])


def make_mock(duration):
    """A constructor that workers unpickle without importing this module (and TensorFlow)."""
    return functools.partial(MockEnvironment, min_duration=duration, max_duration=duration)


@pytest.mark.parametrize("blocking", [True, False])
@pytest.mark.parametrize("kind", ["zeros", "random"])
def test_every_episode_begins_with_a_reset(kind, blocking):
    durations = [2, 3]
    workers = [ExternalProcess(make_mock(duration)) for duration in durations]
    with BatchEnv(workers, blocking) as batch:
        env = InGraphBatchEnv(batch)
        algo_class = ZeroAlgorithm if kind == "zeros" else MockAlgorithm
        algo = algo_class(env.observation_space, env.action_space, record=False)
        one_step = tf.function(lambda: simulate(env, algo, steps=1))
        four_steps = tf.function(lambda: simulate(env, algo, steps=4))
        episodes = sum(int(one_step()["episodes"]) for _ in range(60))
        episodes += sum(int(four_steps()["episodes"]) for _ in range(15))
        # 120 steps: 60 episodes of 2 steps and 40 of 3, none cut short or overrun.
        assert episodes == 100
        assert [worker.steps for worker in workers] == [[2] * 60, [3] * 40]
        assert int(algo.perform_calls) == 120


class LoggedBatchEnv(BatchEnv):
    """Appends 'reset' and 'step' to `log` when called."""

    def __init__(self, envs, log):
        super().__init__(envs, blocking=True)
        self._log = log

    def reset(self, indices=None, seed=None):
        self._log.append("reset")
        return super().reset(indices, seed)

    def step(self, actions):
        self._log.append("step")
        return super().step(actions)


class LoggedAlgorithm(Algorithm):
    """Appends the name of each call to `log` and counts calls in a variable.

    The variable gives the conds around begin_episodes and end_episodes variable inputs, so
    that automatic control dependencies alone would not order them against the log calls.
    """

    def __init__(self, log):
        super().__init__()
        self._log = log
        self.calls = tf.Variable(0)

    def begin_episodes(self, agent_indices):
        self._note("begin")

    def perform(self, agent_indices, observ):
        self._note("perform")
        return tf.zeros([tf.shape(agent_indices)[0], 1])

    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        self._note("experience")

    def end_episodes(self, agent_indices):
        self._note("end")

    def _note(self, name):
        self.calls.assign_add(1)
        tf.numpy_function(lambda: self._log.append(name) or np.int32(0), [], tf.int32)


def test_algorithm_and_environment_calls_run_in_program_order():
    log = []
    envs = [MockEnvironment(min_duration=d, max_duration=d) for d in [1, 2]]
    env = InGraphBatchEnv(LoggedBatchEnv(envs, log))
    algo = LoggedAlgorithm(log)
    one_step = tf.function(lambda: simulate(env, algo, steps=1))
    three_steps = tf.function(lambda: simulate(env, algo, steps=3))
    for _ in range(20):
        one_step()
        three_steps()
    # Environment 0 ends every step and environment 1 every second step, so every step
    # begins with a reset and ends some episode.
    step = ["reset", "begin", "perform", "step", "experience", "end"]
    assert log == step * 80
    assert int(algo.calls) == 4 * 80


class ReadsElapsedAtBegin(Heuristic):
    """Path 0; `begin_episodes` notes the new episodes' `elapsed` from Python, in a
    `tf.numpy_function` with no inputs, so only `simulate`'s ordering makes it run after
    the reset's variable writes."""

    def __init__(self, env, seen):
        super().__init__("shortest")
        self._env, self._seen = env, seen

    def begin_episodes(self, agent_indices):
        def note(indices):
            self._seen.append(self._env.elapsed.numpy()[indices])
            return np.int32(0)

        tf.numpy_function(note, [agent_indices], tf.int32)


def test_begin_episodes_runs_after_a_reset_by_mask():
    env = Routing(8, seed=1)
    seen = []
    algo = ReadsElapsedAtBegin(env, seen)
    run = tf.function(lambda: simulate(env, algo, steps=200))
    assert int(run()["episodes"]) > 8  # Path 0 fills up: episodes end and restart.
    assert len(seen) > 1 and all((elapsed == 0).all() for elapsed in seen)
