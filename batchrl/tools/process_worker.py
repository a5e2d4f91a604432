"""The worker side of `ExternalProcess`: builds one environment in a fresh interpreter and
answers its parent's calls until asked to close, or until the parent is gone.

Started as `python -m batchrl.tools.process_worker FD PARENT_PID` (see
`external_process.py` for why a fresh interpreter); it imports no TensorFlow. The
messages both sides exchange are defined here.
"""

from __future__ import annotations

import inspect
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from typing import Any

import cloudpickle

# Messages from the parent.
CALL = "call"
ACCESS = "access"
CLOSE = "close"
# Messages from the worker.
READY = "ready"
RESULT = "result"
EXCEPTION = "exception"
# Stands in for a method of the environment, which is called remotely instead of pickled.
METHOD = "<method>"


def serve_parent(conn: multiprocessing.connection.Connection, parent_pid: int) -> None:
    """Builds the environment and answers requests until asked to close.

    A parent that closes the pipe or dies, at any point (also while the environment is
    still being built, as when Ctrl-C lands during start-up), ends the worker quietly.
    """
    # The trainer handles Ctrl-C (a SIGINT sent to this process by pid, too).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, args=(parent_pid,), daemon=True).start()
    try:
        _serve(conn)
    except (EOFError, ConnectionError):  # The parent closed the pipe or died.
        pass


def _serve(conn: multiprocessing.connection.Connection) -> None:
    """Builds the environment, then answers requests until `CLOSE` or the pipe's end."""
    payload = conn.recv_bytes()
    try:
        env = cloudpickle.loads(payload)()
        spec = getattr(env, "spec", None)
        response = (READY, (env.observation_space, env.action_space, getattr(spec, "id", None)))
    except Exception:
        response = (EXCEPTION, _describe_exception())
    if response[0] == EXCEPTION:
        conn.send_bytes(_encode(response))
        return
    try:
        conn.send_bytes(_encode(response))
        while True:
            message, payload = conn.recv()
            if message == CLOSE:
                break
            try:
                if message == CALL:
                    name, args, kwargs = payload
                    result = getattr(env, name)(*args, **kwargs)
                else:
                    result = getattr(env, payload)
                    result = METHOD if inspect.isroutine(result) else result
                response = (RESULT, result)
            except Exception:
                response = (EXCEPTION, _describe_exception())
            conn.send_bytes(_encode(response))
    finally:
        env.close()


def _encode(response: tuple[str, Any]) -> bytes:
    """Pickles an answer; cloudpickle (4x slower) only for objects of classes in `__main__`."""
    try:
        return pickle.dumps(response, pickle.HIGHEST_PROTOCOL)
    except Exception:
        pass
    try:
        return cloudpickle.dumps(response)
    except Exception:
        return pickle.dumps((EXCEPTION, _describe_exception()))


def _describe_exception() -> tuple[str, str, str]:
    """The type name, message and traceback of the exception being handled."""
    error = sys.exc_info()[1]
    return type(error).__name__, str(error), traceback.format_exc()


def _exit_with_parent(parent_pid: int) -> None:
    """Ends the worker when its parent is gone, even while the environment is busy."""
    while os.getppid() == parent_pid:
        time.sleep(0.5)
    os._exit(1)


if __name__ == "__main__":
    serve_parent(multiprocessing.connection.Connection(int(sys.argv[1])), int(sys.argv[2]))
