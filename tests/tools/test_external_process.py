"""Tests of ExternalProcess: forwarding, constructors, errors, dead workers and cleanup."""

import concurrent.futures
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time

import cloudpickle
import gymnasium as gym
import numpy as np
import psutil
import pytest

from batchrl.tools.external_process import (
    ExternalProcess,
    ExternalProcessError,
    RemoteEnvironmentError,
    WorkerDiedError,
)
from tests.tools._envs import CountEnv

pytestmark = pytest.mark.usefixtures("no_new_children")


def is_gone(pid):
    """Whether `pid` no longer runs (it may remain as a zombie of another parent)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def run_script(tmp_path):
    """Starts Python scripts with piped output; kills those still running at teardown."""
    scripts = []

    def run(source, **kwargs):
        path = tmp_path / f"script{len(scripts)}.py"
        path.write_text(textwrap.dedent(source))
        script = subprocess.Popen(
            [sys.executable, str(path)],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            **kwargs,
        )
        scripts.append(script)
        return script

    yield run
    for script in scripts:
        script.kill()
        script.communicate()


def test_matches_the_environment_in_process():
    local = gym.make("Pendulum-v1")
    with ExternalProcess(lambda: gym.make("Pendulum-v1")) as remote:
        assert remote.observation_space == local.observation_space
        assert remote.action_space == local.action_space
        assert remote.spec.id == "Pendulum-v1"
        assert remote.name.endswith(":Pendulum-v1")
        assert remote.get_wrapper_attr("max_speed") == 8.0  # A method, called remotely.
        remote_observ, _ = remote.reset(seed=3)
        local_observ, _ = local.reset(seed=3)
        assert isinstance(remote_observ, np.ndarray)
        np.testing.assert_array_equal(remote_observ, local_observ)
        for action in [-2.0, 0.5, 1.5]:
            action = np.array([action], np.float32)
            remote_step = remote.step(action)
            local_step = local.step(action)
            np.testing.assert_array_equal(remote_step[0], local_step[0])
            assert remote_step[1:] == local_step[1:]
        with pytest.raises(AttributeError, match="no attribute 'missing'"):
            remote.missing  # noqa: B018
    local.close()


def test_non_blocking_calls_return_promises_in_order():
    with ExternalProcess(CountEnv) as env:
        promise = env.reset(seed=7, blocking=False)
        assert callable(promise)
        observ, _ = promise()
        np.testing.assert_array_equal(observ, [0, 0, 7])
        first = env.step(1, blocking=False)
        second = env.step(0, blocking=False)  # Reads the answer of `first` before sending.
        assert second()[0].tolist() == [2, 0, 7]
        assert first()[0].tolist() == [1, 1, 7]


@pytest.mark.parametrize(
    "constructor, delay", [(CountEnv, 0.0), (lambda: CountEnv(delay=0.001), 0.001)]
)
def test_lambda_and_class_constructors(constructor, delay):
    with ExternalProcess(constructor) as env:
        _, info = env.reset()
        assert info["pid"] == env.pid != os.getpid()
        assert not info["tensorflow"]
        assert env.delay == delay


def test_class_defined_in_main_without_rerunning_main(run_script):
    # The worker must unpickle the class by value and never run the script again.
    script = run_script(
        """
        import gymnasium as gym
        import numpy as np
        from batchrl.tools.external_process import ExternalProcess

        print("main module runs", flush=True)

        class MainEnv(gym.Env):
            observation_space = gym.spaces.Box(0, 1, (1,), np.float32)
            action_space = gym.spaces.Discrete(2)

            def reset(self, *, seed=None, options=None):
                return np.full(1, 0.25, np.float32), {}

        if __name__ == "__main__":
            for constructor in [MainEnv, lambda: MainEnv()]:
                with ExternalProcess(constructor) as env:
                    print("observ", env.reset()[0].tolist(), flush=True)
        """,
    )
    stdout, stderr = script.communicate(timeout=30)
    assert script.returncode == 0, stderr
    assert stdout.splitlines() == ["main module runs", "observ [0.25]", "observ [0.25]"]


@pytest.mark.parametrize(
    "fail_in, call, type_name, message",
    [
        ("init", "construction", "ValueError", "CountEnv refuses to be built"),
        ("reset", "reset()", "ValueError", "CountEnv refuses to reset"),
        ("step", "step()", "KeyError", "CountEnv refuses to step"),
    ],
)
def test_environment_errors_surface_with_message_and_traceback(fail_in, call, type_name, message):
    with pytest.raises(RemoteEnvironmentError) as raised:
        with ExternalProcess(lambda: CountEnv(fail_in=fail_in)) as env:
            env.reset()
            env.step(0)
    error = raised.value
    assert error.type_name == type_name
    assert message in error.remote_message
    assert message in str(error) and f"Environment {call}" in str(error)
    assert "Traceback (most recent call last)" in error.remote_traceback
    # The frame of the environment's own method; its file name is _envs.py, or
    # <dynamic-code> since cloudpickle 3.1.3 for classes it sends by value.
    method = {"init": "__init__", "reset": "reset", "step": "step"}[fail_in]
    assert f", in {method}\n" in error.remote_traceback


def test_worker_survives_an_environment_error():
    with ExternalProcess(lambda: CountEnv(fail_in="step")) as env:
        with pytest.raises(RemoteEnvironmentError):
            env.step(0)
        assert env.fail_in == "step"
        assert env.reset(seed=1)[0].tolist() == [0, 0, 1]


@pytest.mark.parametrize("death", ["sigkill", "exit"])
def test_dead_worker_raises_naming_worker_and_exit_code(death):
    env = ExternalProcess(lambda: CountEnv(fail_in="exit" if death == "exit" else None), "dying")
    env.reset()
    if death == "sigkill":
        os.kill(env.pid, signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(WorkerDiedError) as raised:
        env.step(0)
    assert time.monotonic() - start < 3.0
    exit_code = -9 if death == "sigkill" else 3
    assert raised.value.exit_code == exit_code
    assert f"'dying' (pid {env.pid}) died with exit code {exit_code}" in str(raised.value)
    with pytest.raises(ExternalProcessError, match="died with exit code"):
        env.reset()
    env.close()
    env.close()


def test_close_returns_promptly_while_the_worker_is_busy():
    env = ExternalProcess(lambda: CountEnv(delay=60.0))
    promise = env.step(0, blocking=False)
    time.sleep(0.2)
    start = time.monotonic()
    env.close()
    assert time.monotonic() - start < 3.0
    assert is_gone(env.pid)
    with pytest.raises(ExternalProcessError, match="it was closed"):
        promise()


def test_slow_call_times_out_naming_the_worker():
    # Construction gets the default timeout (a loaded machine can take seconds to start a
    # worker); the step, which would take 60 s, waits 0.5 s. No clock is asserted: a step
    # that did not time out would return instead of raising.
    env = ExternalProcess(lambda: CountEnv(delay=60.0), name="slow")
    promise = env.step(0, blocking=False)
    with pytest.raises(TimeoutError, match=f"'slow' \\(pid {env.pid}\\) did not answer step"):
        promise(timeout=0.5)
    assert is_gone(env.pid)
    env.close()


def test_ctrl_c_closes_the_workers(run_script, default_sigint):
    script = run_script(
        """
        from _envs import CountEnv
        from batchrl.tools.external_process import ExternalProcess

        envs = [ExternalProcess(lambda: CountEnv(delay=0.05)) for _ in range(2)]
        print(*[env.pid for env in envs], flush=True)
        while True:
            for env in envs:
                env.step(0)
        """,
        env=dict(os.environ, PYTHONPATH=os.path.dirname(__file__)),
        start_new_session=True,
    )
    pids = [int(pid) for pid in script.stdout.readline().split()]
    assert len(pids) == 2 and all(psutil.pid_exists(pid) for pid in pids)
    time.sleep(0.2)
    os.killpg(script.pid, signal.SIGINT)  # As a terminal does: the workers get it too.
    _, stderr = script.communicate(timeout=10)
    assert stderr.count("KeyboardInterrupt") == 1, stderr  # The workers ignored SIGINT.
    assert not any(psutil.pid_exists(pid) for pid in pids)


def test_worker_exits_when_its_parent_is_killed(run_script):
    script = run_script(
        """
        import time
        from _envs import CountEnv
        from batchrl.tools.external_process import ExternalProcess

        env = ExternalProcess(lambda: CountEnv(delay=60.0))
        print(env.pid, flush=True)
        env.step(0)
        """,
        env=dict(os.environ, PYTHONPATH=os.path.dirname(__file__)),
    )
    pid = int(script.stdout.readline())
    script.kill()
    script.communicate(timeout=10)
    deadline = time.monotonic() + 3.0
    while not is_gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert is_gone(pid)


def test_calls_from_several_threads_get_their_own_answers():
    # Observations are [steps, last action, seed]: a reset with seed k answers ([0, 0, k],
    # info) and a step with action a answers ([n, a, seed], a, ...), so an answer handed to
    # the wrong call shows.
    def resets(env, stop):
        count, wrong = 0, []
        while time.monotonic() < stop:
            count += 1
            answer = env.reset(seed=count)
            if not (isinstance(answer, tuple) and len(answer) == 2):
                wrong.append(answer)
            elif answer[0].tolist() != [0, 0, count]:
                wrong.append(answer)
        return count, wrong

    def steps(env, stop):
        count, wrong = 0, []
        while time.monotonic() < stop:
            count += 2
            first, second = env.step(1, blocking=False), env.step(0, blocking=False)
            for action, answer in [(0, second()), (1, first())]:  # In reverse order.
                if not (isinstance(answer, tuple) and len(answer) == 5):
                    wrong.append(answer)
                elif not answer[0][1] == answer[1] == action:
                    wrong.append(answer)
        return count, wrong

    def attributes(env, stop):
        count, wrong = 0, []
        while time.monotonic() < stop:
            count += 1
            if env.delay != 0.0:
                wrong.append(env.delay)
        return count, wrong

    with ExternalProcess(CountEnv) as env:
        stop = time.monotonic() + 1.5
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(calls, env, stop) for calls in (resets, steps, attributes)]
            results = [future.result() for future in futures]
        for count, wrong in results:
            assert count > 20 and not wrong, wrong[:3]
        assert env.reset(seed=5)[0].tolist() == [0, 0, 5]  # The worker survived.


def test_call_interrupted_by_ctrl_c_leaves_its_answer_to_itself():
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        with ExternalProcess(lambda: CountEnv(delay=0.5)) as env:
            env.reset(seed=1)
            signal.setitimer(signal.ITIMER_REAL, 0.2)  # Lands while the step is awaited.
            with pytest.raises(KeyboardInterrupt):
                env.step(1)
            # The step's answer is still read first, and not handed to the reset.
            assert env.reset(seed=2)[0].tolist() == [0, 0, 2]
            assert env.step(0)[0].tolist() == [1, 0, 2]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_close_from_another_thread_ends_a_waiting_call():
    env = ExternalProcess(lambda: CountEnv(delay=60.0))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(env.step, 0)
        time.sleep(0.2)
        env.close()
        with pytest.raises(ExternalProcessError, match="Cannot wait for step.*it was closed"):
            waiting.result(timeout=5)
    assert is_gone(env.pid)


def test_the_worker_is_outside_the_terminals_process_group():
    """Ctrl-C signals the terminal's process group: the worker, still importing, must not
    get it (its SIGINT is ignored only once its module has loaded)."""
    env = ExternalProcess(CountEnv)
    try:
        assert os.getpgid(env.pid) != os.getpgid(0)
        assert os.getsid(env.pid) != os.getsid(0)
    finally:
        env.close()


@pytest.mark.parametrize("closed_after", [0.0, 0.5], ids=["before_building", "while_building"])
def test_worker_whose_parent_closes_the_pipe_exits_quietly(closed_after):
    # Ctrl-C during start-up: the trainer closes its end while the worker still reads the
    # constructor (0.0) or still builds the environment (0.5 s into a 1 s constructor).
    # The worker then exits 0 and prints nothing: no BrokenPipeError from its answer.
    def slow_constructor():
        time.sleep(1.0)
        return CountEnv()

    parent_conn, child_conn = multiprocessing.Pipe()
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "batchrl.tools.process_worker",
            str(child_conn.fileno()),
            str(os.getpid()),
        ],
        pass_fds=[child_conn.fileno()],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(p or os.getcwd() for p in sys.path)),
    )
    child_conn.close()
    if closed_after:
        parent_conn.send_bytes(cloudpickle.dumps(slow_constructor))
        time.sleep(closed_after)
    parent_conn.close()
    stdout, stderr = worker.communicate(timeout=30)
    assert (worker.returncode, stdout, stderr) == (0, "", "")
