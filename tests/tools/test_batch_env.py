"""Tests of BatchEnv: batched step and reset, validation, and parallel workers."""

import functools
import time

import gymnasium as gym
import numpy as np
import psutil
import pytest

from batchrl.tools.batch_env import BatchEnv, GroupedBatchEnv, make_group
from batchrl.tools.external_process import ExternalProcess, RemoteEnvironmentError
from tests.tools._envs import BoxEnv, CountEnv, WrongShapeEnv

pytestmark = pytest.mark.usefixtures("no_new_children")


def is_gone(pid):
    """Whether `pid` no longer runs (it may remain as a zombie of another parent)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_step_and_reset_return_batched_arrays():
    envs = BatchEnv([CountEnv() for _ in range(3)], blocking=True)
    observ = envs.reset(seed=10)  # Environment i is seeded with 10 + i.
    np.testing.assert_array_equal(observ, [[0, 0, 10], [0, 0, 11], [0, 0, 12]])
    observ, reward, terminated, truncated, infos = envs.step(np.array([0, 1, 2]))
    np.testing.assert_array_equal(observ, [[1, 0, 10], [1, 1, 11], [1, 2, 12]])
    assert reward.dtype == np.float32 and reward.tolist() == [0, 1, 2]
    assert terminated.dtype == bool and terminated.tolist() == [False, False, True]
    assert truncated.dtype == bool and truncated.tolist() == [False, False, False]
    assert infos == [{"steps": 1}] * 3
    assert len(envs) == 3 and isinstance(envs[1], CountEnv)


def test_reset_of_some_environments_with_seeds():
    envs = BatchEnv([CountEnv() for _ in range(3)], blocking=True)
    envs.reset()
    envs.step([1, 1, 1])
    observ = envs.reset([2, 0], seed=5)
    np.testing.assert_array_equal(observ, [[0, 0, 7], [0, 0, 5]])
    observ = envs.step([0, 0, 0])[0]
    np.testing.assert_array_equal(observ[:, 0], [1, 2, 1])  # Environment 1 went on.
    assert envs.reset([]).shape == (0, 3)
    with pytest.raises(IndexError, match="Cannot reset environment 3: valid indices are 0 to 2"):
        envs.reset([0, 3])


def test_termination_and_truncation_stay_distinct():
    envs = BatchEnv([gym.wrappers.TimeLimit(CountEnv(), 2) for _ in range(2)], blocking=True)
    envs.reset()
    _, _, terminated, truncated, _ = envs.step([0, 2])  # Action 2 terminates.
    assert terminated.tolist() == [False, True] and truncated.tolist() == [False, False]
    _, _, terminated, truncated, _ = envs.step([0, 0])  # Environment 0 hits its limit.
    assert terminated[0] == np.False_ and truncated[0] == np.True_


def test_invalid_actions_raise_naming_the_value_and_the_valid_ones():
    envs = BatchEnv([CountEnv() for _ in range(3)], blocking=True)
    envs.reset()
    with pytest.raises(ValueError, match=r"shape \(2,\).*needs shape \(3,\)"):
        envs.step([0, 1])
    with pytest.raises(ValueError, match=r"Action 3 for environment 1 .* integers in \[0, 3\)"):
        envs.step([0, 3, 1])
    with pytest.raises(ValueError, match=r"must be integers in \[0, 3\), got dtype float64"):
        envs.step([0.0, 1.0, 1.0])
    for env in envs:
        env.action_space = gym.spaces.Discrete(3, start=1)
    shifted = BatchEnv(list(envs), blocking=True)
    with pytest.raises(ValueError, match=r"Action 0 for environment 0 .* integers in \[1, 4\)"):
        shifted.step([0, 1, 3])
    assert shifted.step([1, 2, 3])[0][:, 1].tolist() == [1, 2, 3]


def test_box_actions_are_cast_to_the_space_dtype():
    envs = BatchEnv([BoxEnv(), BoxEnv()], blocking=True)
    envs.reset()
    observ, *_, infos = envs.step(np.array([[0.5, -0.5], [0.25, 1.0]], np.float64))
    assert [info["dtype"] for info in infos] == ["float32", "float32"]
    np.testing.assert_array_equal(observ, [[0.5, -0.5], [0.25, 1.0]])
    with pytest.raises(ValueError, match=r"shape \(2,\).*needs shape \(2, 2\)"):
        envs.step([0.0, 0.0])


def test_mismatched_spaces_raise_naming_the_index_and_both_spaces():
    with pytest.raises(ValueError, match=r"Environment 1 has observation space Box.*environment 0"):
        BatchEnv([CountEnv(), BoxEnv()], blocking=True)
    other = CountEnv()
    other.action_space = gym.spaces.Discrete(4)
    with pytest.raises(
        ValueError, match=r"Environment 2 has action space Discrete\(4\).*Discrete\(3\)"
    ):
        BatchEnv([CountEnv(), CountEnv(), other], blocking=True)


def test_close_closes_every_environment_even_when_one_raises():
    class FailingClose(CountEnv):
        def close(self):
            raise OSError("cannot close")

    envs = [CountEnv(), FailingClose(), CountEnv()]
    with pytest.raises(OSError, match="cannot close"):
        with BatchEnv(envs, blocking=True):
            pass
    assert envs[0].closed and envs[2].closed


@pytest.mark.parametrize("blocking", [True, False])
def test_external_processes_match_environments_in_process(blocking):
    local = BatchEnv([gym.make("Pendulum-v1") for _ in range(2)], blocking=True)
    with BatchEnv(
        [ExternalProcess(lambda: gym.make("Pendulum-v1")) for _ in range(2)], blocking
    ) as remote:
        np.testing.assert_array_equal(remote.reset(seed=4), local.reset(seed=4))
        actions = np.array([[1.0], [-1.0]])
        for remote_part, local_part in zip(remote.step(actions), local.step(actions), strict=True):
            np.testing.assert_array_equal(remote_part, local_part)
        pids = [env.pid for env in remote]
    assert not any(psutil.pid_exists(pid) for pid in pids)
    local.close()


def test_non_blocking_error_leaves_other_workers_in_order():
    envs = [ExternalProcess(CountEnv), ExternalProcess(lambda: CountEnv(fail_in="step"))]
    with BatchEnv(envs, blocking=False) as batch:
        batch.reset(seed=0)
        with pytest.raises(RemoteEnvironmentError, match="CountEnv refuses to step"):
            batch.step([1, 1])
        observ = batch.reset([0])  # Would return the step of worker 0 if left unread.
        np.testing.assert_array_equal(observ, [[0, 0, -1]])


def test_non_blocking_steps_run_in_parallel():
    # Each step sleeps 20 ms: in turn, 4 environments take 4 times as long as at once.
    envs = [ExternalProcess(lambda: CountEnv(delay=0.02)) for _ in range(4)]
    durations = {}
    for blocking in [True, False]:
        batch = BatchEnv(envs, blocking)
        batch.reset()
        start = time.perf_counter()
        for _ in range(10):
            batch.step([0, 0, 0, 0])
        durations[blocking] = time.perf_counter() - start
    BatchEnv(envs, blocking=True).close()
    assert durations[True] / durations[False] > 2.5, durations


def test_groups_step_and_reset_like_one_batch():
    def group(size):
        return BatchEnv([CountEnv() for _ in range(size)], blocking=True)

    envs = GroupedBatchEnv([group(2), group(1), group(2)], sizes=[2, 1, 2], blocking=True)
    assert len(envs) == 5
    observ = envs.reset(seed=10)  # Environment i is seeded with 10 + i, as in BatchEnv.
    np.testing.assert_array_equal(observ[:, 2], [10, 11, 12, 13, 14])
    observ, reward, terminated, truncated, infos = envs.step(np.array([0, 1, 2, 1, 0]))
    np.testing.assert_array_equal(observ[:, 1], [0, 1, 2, 1, 0])
    assert reward.tolist() == [0, 1, 2, 1, 0] and terminated.tolist() == [0, 0, 1, 0, 0]
    assert truncated.tolist() == [False] * 5 and len(infos) == 5
    observ = envs.reset([4, 0, 2], seed=20)  # Answers in the order asked, across groups.
    np.testing.assert_array_equal(observ[:, 2], [24, 20, 22])
    observ = envs.step(np.zeros(5, np.int64))[0]
    np.testing.assert_array_equal(observ[:, 0], [1, 2, 1, 2, 1])
    assert envs.reset([]).shape == (0, 3)
    with pytest.raises(IndexError, match="valid indices are 0 to 4"):
        envs.reset([5])
    with pytest.raises(ValueError, match=r"needs shape \(5,\)"):
        envs.step([0, 1])
    with pytest.raises(ValueError, match=r"sizes=\[2\] must give a positive size for each"):
        GroupedBatchEnv([group(2), group(2)], sizes=[2], blocking=True)


def test_groups_in_worker_processes_match_environments_in_process():
    workers = [ExternalProcess(functools.partial(make_group, CountEnv, 2)) for _ in range(2)]
    local = BatchEnv([CountEnv() for _ in range(4)], blocking=True)
    with GroupedBatchEnv(workers, sizes=[2, 2], blocking=False) as envs:
        np.testing.assert_array_equal(envs.reset(seed=3), local.reset(seed=3))
        for actions in ([0, 1, 1, 0], [1, 1, 0, 2]):
            for got, expected in zip(envs.step(actions), local.step(actions), strict=True):
                np.testing.assert_array_equal(got, expected)
        assert envs[0].call("__len__") == 2  # Group 0 lives in its worker.


def test_hung_workers_share_one_deadline_and_are_all_named():
    hung = lambda: CountEnv(delay=60.0)
    workers = [
        ExternalProcess(CountEnv, name="fine"),
        ExternalProcess(hung, name="hung-1"),
        ExternalProcess(CountEnv, name="also-fine"),
        ExternalProcess(hung, name="hung-2"),
    ]
    with BatchEnv(workers, blocking=False, timeout=1.0) as batch:
        batch.reset()
        # Waiting on each in turn, the second hung worker would be named in a second error
        # after a second wait; against one deadline both are named in the first.
        with pytest.raises(TimeoutError) as raised:
            batch.step([0, 0, 0, 0])
        message = str(raised.value)
        assert "did not answer step() within 1.0 seconds and were terminated" in message
        assert f"'hung-1' (pid {workers[1].pid}), 'hung-2' (pid {workers[3].pid})" in message
        assert "fine" not in message
        assert is_gone(workers[1].pid) and is_gone(workers[3].pid)
        observ = batch[0].step(1)[0]  # The others answered and are ready for more.
        assert observ.tolist() == [2, 1, -1]


def test_blocking_batch_waits_for_each_worker_with_its_timeout():
    workers = [ExternalProcess(CountEnv), ExternalProcess(lambda: CountEnv(delay=60.0), "hung")]
    with BatchEnv(workers, blocking=True, timeout=0.5) as batch:
        batch.reset()
        with pytest.raises(
            TimeoutError, match=r"'hung' \(pid \d+\) did not answer step\(\) within 0.5"
        ):
            batch.step([0, 0])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            dict(observ_shape=(4,)),
            r"Environment 1 returned an observation of shape \(4,\) from step\(\), but its "
            r"observation_space declares shape \(3,\)\.",
        ),
        (
            dict(observ_shape=(4,), in_reset=True),
            r"Environment 1 returned an observation of shape \(4,\) from reset\(\), but its "
            r"observation_space declares shape \(3,\)\.",
        ),
        (
            dict(observ_shape=(3, 1)),
            r"Environment 1 returned an observation of shape \(3, 1\) from step\(\)",
        ),
        (
            dict(reward_shape=(1,)),
            r"Environment 1 returned a reward of shape \(1,\) from step\(\), but it must be "
            r"a scalar\.",
        ),
    ],
)
def test_wrong_shapes_raise_naming_the_environment_and_both_shapes(kwargs, message):
    envs = BatchEnv([CountEnv(), WrongShapeEnv(**kwargs), CountEnv()], blocking=True)
    with pytest.raises(ValueError, match=message):
        envs.reset()
        envs.step([0, 0, 0])


def test_all_observations_of_one_wrong_shape_are_caught():
    envs = BatchEnv([WrongShapeEnv(observ_shape=(2,)) for _ in range(2)], blocking=True)
    envs.reset()
    with pytest.raises(ValueError, match=r"Environment 0 returned an observation of shape \(2,\)"):
        envs.step([0, 0])


@pytest.mark.parametrize("blocking", [True, False])
def test_wrong_shape_in_a_worker_names_the_worker(blocking):
    workers = [
        ExternalProcess(CountEnv),
        ExternalProcess(lambda: WrongShapeEnv(observ_shape=(5,)), name="bad"),
    ]
    with BatchEnv(workers, blocking) as envs:
        envs.reset()
        message = r"Environment 1 \(worker 'bad'\) returned an observation of shape \(5,\)"
        with pytest.raises(ValueError, match=message):
            envs.step([0, 0])
