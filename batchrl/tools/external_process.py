"""Runs a Gymnasium environment in its own process, with blocking and non-blocking calls."""

from __future__ import annotations

import functools
import itertools
import multiprocessing
import multiprocessing.connection
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import cloudpickle

from batchrl.tools.process_worker import (
    ACCESS,
    CALL,
    CLOSE,
    EXCEPTION,
    METHOD,
    READY,
    RESULT,
)

# How the worker starts. TensorFlow is not fork-safe once initialized, so a plain fork of
# the trainer is out; multiprocessing's spawn and forkserver re-import the parent's
# `__main__` (which imports TensorFlow, ~4 s) in every worker. Instead we fork-exec a fresh
# interpreter that runs only this module (`python -m batchrl.tools.process_worker`, which
# imports no TensorFlow) and hand it one end of a socket pair (`multiprocessing.Pipe`)
# through `pass_fds`. The constructor travels through that pipe with cloudpickle, so
# lambdas and classes defined in `__main__` work; the parent's `sys.path` goes along in
# PYTHONPATH so that constructors defined in the user's modules can be imported. A worker
# for Pendulum-v1 starts in 0.15 to 0.5 s, mostly the import of gymnasium.
#
# Observations are pickled into the answer instead of going through shared memory as in
# Gymnasium's AsyncVectorEnv: for small observations the round trip is dominated by waking
# the other process (about 90 us for Pendulum-v1 and 190 us for HalfCheetah-v5 either way),
# and shared memory saved no measurable time.
_WORKER_MODULE = "batchrl.tools.process_worker"

# Seconds between checks that the worker is alive while waiting for an answer.
_POLL_INTERVAL = 0.1

# Seconds `close` waits for a worker to exit after asking it, and after SIGTERM.
_CLOSE_GRACE = 1.0

_counter = itertools.count()


class ExternalProcessError(RuntimeError):
    """Something went wrong with an environment worker."""


class RemoteEnvironmentError(ExternalProcessError):
    """The environment raised an exception inside its worker.

    Attributes:
      type_name: the name of the exception class raised by the environment.
      remote_message: the message of that exception.
      remote_traceback: the formatted traceback inside the worker.
    """

    def __init__(self, worker: str, call: str, type_name: str, message: str, trace: str):
        super().__init__(
            f"Environment {call} in worker {worker} raised {type_name}: {message}\n\n"
            f"Traceback in the worker:\n{trace}"
        )
        self.type_name = type_name
        self.remote_message = message
        self.remote_traceback = trace


class WorkerDiedError(ExternalProcessError):
    """The worker process ended without being asked to.

    Attributes:
      exit_code: the exit status of the worker; -N when it was killed by signal N.
    """

    def __init__(self, message: str, exit_code: int | None):
        super().__init__(message)
        self.exit_code = exit_code


class ExternalProcess:
    """Steps an environment in a separate process, to step many at once.

    The environment is built by `constructor()` inside the worker. `step`, `reset` and any
    other method can be called without blocking: they then return a promise, a function
    that waits for the result and returns it. A batch of workers steps in parallel:

        promises = [env.step(action, blocking=False) for env, action in zip(envs, actions)]
        transitions = [promise() for promise in promises]

    Several threads may call one worker: the worker answers one request at a time and in
    order, and each call, blocking or not, gets the answer to its own request.

    Exceptions of the environment are re-raised as `RemoteEnvironmentError`; a worker that
    dies raises `WorkerDiedError` and a call that takes longer than `timeout` seconds raises
    `TimeoutError`, both naming the worker. The worker runs in a session of its own and
    ignores SIGINT, so that Ctrl-C reaches only the trainer, which closes its workers on
    exit, and it exits by itself when the trainer dies.
    """

    def __init__(
        self,
        constructor: Callable[[], Any],
        name: str | None = None,
        timeout: float = 60.0,
    ):
        """Starts the worker and waits until the environment is built.

        Args:
          constructor: callable without arguments that returns a Gymnasium environment.
          name: how errors refer to this worker; defaults to a counter and the env id.
          timeout: seconds any single call, including construction, may take.

        Raises:
          RemoteEnvironmentError: the constructor raised.
          WorkerDiedError: the worker died during construction.
          TimeoutError: the constructor took longer than `timeout`.
        """
        payload = cloudpickle.dumps(constructor)
        self._timeout = timeout
        self._name = name if name is not None else str(next(_counter))
        # Held from sending a request until its answer is read, so that threads take turns;
        # reentrant because a request first reads the answer of the pending promise.
        self._lock = threading.RLock()
        self._pending = None  # The promise whose answer is the next in the pipe.
        self._closed_reason = None
        self._conn, child_conn = multiprocessing.Pipe()
        python_path = os.pathsep.join([path or os.getcwd() for path in sys.path])
        self._process = subprocess.Popen(
            [sys.executable, "-m", _WORKER_MODULE, str(child_conn.fileno()), str(os.getpid())],
            pass_fds=[child_conn.fileno()],
            stdin=subprocess.DEVNULL,
            env=dict(os.environ, PYTHONPATH=python_path),
            # Out of the terminal's process group: Ctrl-C signals the trainer alone, also
            # while the worker still imports (before `serve_parent` can ignore SIGINT).
            start_new_session=True,
        )
        child_conn.close()
        self._finalizer = weakref.finalize(self, _shutdown, self._process, self._conn)
        try:
            try:
                self._conn.send_bytes(payload)
            except OSError:
                raise self._died("construction") from None
            spaces = self._receive("construction", READY)
        except BaseException:
            self.close()
            raise
        self.observation_space, self.action_space, env_id = spaces
        if name is None and env_id:
            self._name = f"{self._name}:{env_id}"

    def __repr__(self) -> str:
        return f"ExternalProcess({self._name!r}, pid={self._process.pid})"

    @property
    def name(self) -> str:
        """The name errors use for this worker."""
        return self._name

    @property
    def pid(self) -> int:
        """The process id of the worker."""
        return self._process.pid

    def __getattr__(self, name: str) -> Any:
        """Reads a public attribute of the environment; methods are called remotely."""
        if name.startswith("_"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        try:
            value = self._request(ACCESS, name, f"attribute {name!r}")()
        except RemoteEnvironmentError as error:
            if error.type_name != "AttributeError":
                raise
            raise AttributeError(error.remote_message) from None
        if isinstance(value, str) and value == METHOD:
            return functools.partial(self.call, name)
        return value

    def call(self, name: str, *args, blocking: bool = True, **kwargs) -> Any:
        """Calls a method of the environment.

        Args:
          name: the method name.
          *args: positional arguments of the method.
          blocking: when false, return a promise instead of the result.
          **kwargs: keyword arguments of the method.

        Returns:
          The result of the method, or a function without arguments that returns it.
        """
        promise = self._request(CALL, (name, args, kwargs), f"{name}()")
        return promise if not blocking else promise()

    def step(self, action: Any, blocking: bool = True) -> Any:
        """Steps the environment.

        Args:
          action: an action of `action_space`.
          blocking: when false, return a promise instead of the result.

        Returns:
          observ, reward, terminated, truncated, info; or a promise of them.
        """
        return self.call("step", action, blocking=blocking)

    def reset(
        self, seed: int | None = None, options: dict | None = None, blocking: bool = True
    ) -> Any:
        """Resets the environment.

        Args:
          seed: seeds the random number generator of the environment when given.
          options: environment-specific reset options.
          blocking: when false, return a promise instead of the result.

        Returns:
          observ, info; or a promise of them.
        """
        return self.call("reset", seed=seed, options=options, blocking=blocking)

    def close(self) -> None:
        """Closes the environment and ends the worker, even when it is busy or dead.

        Asks the worker to close, waits up to a second, then terminates it. Safe to call
        more than once.
        """
        if self._closed_reason is None:
            self._closed_reason = "it was closed"
        self._pending = None
        self._finalizer()

    def __enter__(self) -> ExternalProcess:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _request(self, message: str, payload: Any, call: str) -> Callable[[], Any]:
        """Sends a request and returns the promise of its answer."""
        with self._lock:
            if self._pending is not None:
                # Keep the pipe in order: the answer of an uncollected call is read first.
                self._pending.wait()
            if self._closed_reason is not None:
                raise ExternalProcessError(f"Cannot call {call} on {self}: {self._closed_reason}.")
            try:
                self._conn.send((message, payload))
            except OSError:
                raise self._died(call) from None
            promise = _Promise(self, call)
            self._pending = promise
            return promise

    def _receive(self, call: str, expected: str = RESULT, timeout: float | None = None) -> Any:
        """Waits for the next answer of the worker, watching for death and timeout.

        Args:
          call: what was asked, for error messages.
          expected: the kind of answer expected.
          timeout: seconds to wait; the worker's `timeout` when None.
        """
        timeout = self._timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while not self._poll(call, deadline):
            if self._process.poll() is not None:
                raise self._died(call)
            if time.monotonic() >= deadline:
                self._closed_reason = f"{call} timed out"
                self._process.terminate()  # A hung worker would not read a request to close.
                self.close()
                raise TimeoutError(
                    f"Environment worker {self._name!r} (pid {self.pid}) did not answer "
                    f"{call} within {timeout} seconds; the worker was terminated."
                )
        try:
            message, payload = self._conn.recv()
        except (EOFError, OSError):
            raise self._died(call) from None
        except BaseException:
            # Interrupted (Ctrl-C) within an answer: its rest would be read as the next one.
            self._closed_reason = f"{call} was interrupted while its answer was read"
            self.close()
            raise
        if message == EXCEPTION:
            raise RemoteEnvironmentError(repr(self), call, *payload)
        if message != expected:
            raise ExternalProcessError(f"Worker {self} sent {message!r} instead of {expected!r}.")
        return payload

    def _poll(self, call: str, deadline: float) -> bool:
        """Whether an answer is ready, after waiting up to a poll interval before `deadline`."""
        try:
            if self._closed_reason is None:
                return self._conn.poll(min(_POLL_INTERVAL, max(0.0, deadline - time.monotonic())))
        except OSError:  # Another thread closed the pipe meanwhile.
            pass
        reason = self._closed_reason or "it was closed"
        raise ExternalProcessError(f"Cannot wait for {call} on {self}: {reason}.")

    def _died(self, call: str) -> ExternalProcessError:
        """Reaps a dead worker and describes its death (or its closing by another thread)."""
        if self._closed_reason is not None:
            return ExternalProcessError(f"Cannot finish {call} on {self}: {self._closed_reason}.")
        try:
            exit_code = self._process.wait(_CLOSE_GRACE)
        except subprocess.TimeoutExpired:  # It closed the pipe but lingers.
            exit_code = None
        how = f"exit code {exit_code}"
        if exit_code is None:
            how = "no exit code (it closed its pipe but still runs)"
        elif exit_code < 0:
            how += f" ({_signal_name(-exit_code)})"
        message = (
            f"Environment worker {self._name!r} (pid {self.pid}) died with {how} during {call}."
        )
        self._closed_reason = f"the worker died with {how}"
        self.close()
        return WorkerDiedError(message, exit_code)


class _Promise:
    """The answer of one non-blocking call; calling it waits for and returns the result."""

    def __init__(self, process: ExternalProcess, call: str):
        self._process = process
        self._call = call
        self._done = False
        self._value = None
        self._error = None

    def wait(self, timeout: float | None = None) -> None:
        """Reads the answer from the pipe, keeping a raised error for `__call__`.

        Args:
          timeout: seconds to wait for the answer; the worker's `timeout` when None.
        """
        process = self._process
        with process._lock:
            if self._done:
                return
            try:
                self._value = process._receive(self._call, timeout=timeout)
            except Exception as error:
                self._error = error
            # Not reached when interrupted (Ctrl-C) before the answer came: the promise
            # stays pending, and the next request reads that answer here first.
            self._done = True
            if process._pending is self:
                process._pending = None

    def __call__(self, timeout: float | None = None) -> Any:
        """Waits for the answer and returns it, or raises the error of the call.

        Args:
          timeout: seconds to wait for the answer; the worker's `timeout` when None.
        """
        self.wait(timeout)
        if self._error is not None:
            raise self._error
        return self._value


def _shutdown(process: subprocess.Popen, conn: multiprocessing.connection.Connection) -> None:
    """Ends a worker politely if possible, by force otherwise, and reaps it."""
    if process.poll() is None:
        try:
            conn.send((CLOSE, None))
        except OSError:
            pass
        try:
            process.wait(_CLOSE_GRACE)
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                process.wait(_CLOSE_GRACE)
            except subprocess.TimeoutExpired:
                process.kill()
    process.wait()
    conn.close()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
