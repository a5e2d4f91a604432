"""Ray actors of the ray runner: connecting, an environment actor, replacing dead actors."""

from __future__ import annotations

import logging
import math
import os
import re
import time
from collections.abc import Callable

import numpy as np
import ray
import tensorflow as tf

from batchrl.runners.unrolls import UnrollCollector

logger = logging.getLogger("batchrl.runners.ray")

# Seconds one `ray.wait` blocks before the learner checks its deadline.
_WAIT_INTERVAL = 1.0

# The job's runtime environment: each worker imports TensorFlow at start without its C++
# start-up lines, as the train script does, so they do not reach the driver's terminal
# once per worker (`(pid=...) I0000 ... cudart_stub.cc`).
RUNTIME_ENV = {"worker_process_setup_hook": "batchrl.quiet.quiet_worker"}


def connect(cfg, cpus_needed: float) -> bool:
    """Connects this process to Ray as the `ray` section says, unless it already is.

    Args:
      cfg: the `ray` section: `address` empty starts Ray on this machine, with as many
        CPUs as the machine has or `cpus_needed`, whichever is more; else it joins the
        cluster at `address`.
      cpus_needed: CPUs the run's actors reserve.

    Returns:
      Whether this call connected (and so `ray.shutdown` is the caller's to call).
    """
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if cfg.address:
        ray.init(address=cfg.address, runtime_env=RUNTIME_ENV)
    else:
        cpus = max(os.cpu_count() or 1, math.ceil(cpus_needed))
        ray.init(address="local", num_cpus=cpus, include_dashboard=False, runtime_env=RUNTIME_ENV)
    return True


def limit_threads(tf_threads: int) -> None:
    """TensorFlow's thread pools of an actor, set before its first op (Ray sets none)."""
    tf.config.threading.set_intra_op_parallelism_threads(tf_threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.set_visible_devices([], "GPU")


@ray.remote(max_restarts=0)
class EnvActor:
    """A Ray actor that owns a batch of environments (an `UnrollCollector`).

    With a behaviour policy (actor-side inference) `unroll` returns whole unrolls; without
    one (dynamic batching in the learner) the learner sends actions to `step`.
    """

    def __init__(self, make_env, make_policy, seed: int, tf_threads: int):
        limit_threads(tf_threads)
        self._collector = UnrollCollector(make_env(), seed)
        self._policy = None if make_policy is None else make_policy(seed)
        self._version = None

    def unroll(self, weights, version: int, length: int) -> tuple[dict, list, list, int]:
        """T steps with the policy holding `weights` (loaded only when `version` is new)."""
        if version != self._version:
            self._policy.load(weights)
            self._version = version
        return (*self._collector.unroll(self._policy, length), version)

    def observ(self) -> np.ndarray:
        return self._collector.observ

    def step(self, action) -> tuple[dict, np.ndarray, tuple[list[float], list[int]]]:
        """One batched step: the transition, the observations to act on next, and the
        returns and lengths of the episodes that ended in it."""
        transition = self._collector.step(action)
        return transition, self._collector.observ, self._collector.take_episodes()

    def pid(self) -> int:
        return os.getpid()

    def env_pids(self) -> list[int]:
        """The processes of its environment workers (none for in-process environments)."""
        return [env.pid for env in self._collector.batch_env if hasattr(env, "pid")]

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def close(self) -> None:
        self._collector.close()


class ActorGroup:
    """A runner part that owns Ray actors in `self._actors` (`Actors`): a context manager
    that closes them, with their handles and restarts. A subclass writes `close`."""

    _actors: Actors

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError

    @property
    def actors(self) -> list:
        """The handles of the actors, by index (a replaced actor has a new handle)."""
        return self._actors.handles

    @property
    def restarts(self) -> int:
        return self._actors.restarts


class Actors:
    """Ray actors of one kind, their replacement when they die, and their end.

    Actors are spread over the nodes (Ray's SPREAD strategy). A failed call is logged and
    its actor replaced, up to `max_restarts` times in all; an exception raised by the
    actor's own code is logged with its remote traceback the first time, and stops the
    run when a replaced actor raises it again, since a restart cannot fix a bug. `close`
    kills every actor. `kind` names them in messages ("actor", "replay shard").
    """

    def __init__(
        self,
        make_actor: Callable[[int, int], object],
        max_restarts: int,
        timeout,
        kind: str = "actor",
    ):
        self._make_actor = make_actor
        self.kind = kind
        self._max_restarts = max_restarts
        self.timeout = timeout
        self.restarts = 0
        self.handles: list = []
        self._replaced: set[int] = set()  # Indices whose actor is a replacement.
        self._errors: set[str] = set()  # The exceptions that actors' code raised so far.

    def start(self, count: int) -> None:
        self.handles = [self._make_actor(index, 0) for index in range(count)]

    def replace(self, index: int, handle, error: BaseException) -> bool:
        """Replaces actor `index` if `handle` is still it; returns whether it did.

        Raises:
          RuntimeError: actors failed more than `max_restarts` times, or a replaced actor
            raised the same exception as an actor before it.
        """
        if self.handles[index] is not handle:
            return False  # Replaced already, on an earlier failed call.
        ray.kill(handle, no_restart=True)
        self.restarts += 1
        raised = _raised(error)
        if raised is not None and raised in self._errors and index in self._replaced:
            raise RuntimeError(
                f"Ray {self.kind} {index}, a replacement, raised {raised} again: restarting does "
                "not fix an error in the actors' code or environments, so training stops "
                "(the remote traceback was logged at its first failure)."
            ) from error
        what = raised or _first_line(error)
        if self.restarts > self._max_restarts:
            raise RuntimeError(
                f"Ray {self.kind} {index} failed, and {self.kind}s have failed {self.restarts} "
                f"times in all, more than ray.max_actor_restarts={self._max_restarts}. Its "
                f"error: {what}"
            ) from error
        traceback = ""
        if raised is not None and raised not in self._errors:
            self._errors.add(raised)
            traceback = "\n" + _ANSI.sub("", str(error)).strip()
        logger.warning(
            "Ray %s %d failed (%s); replacing it (restart %d of at most %d).%s",
            self.kind,
            index,
            what,
            self.restarts,
            self._max_restarts,
            traceback,
        )
        self.handles[index] = self._make_actor(index, self.restarts)
        self._replaced.add(index)
        return True

    def wait(self, refs: list, what: str, deadline: float, actors=()) -> list:
        """The refs of `refs` that are ready, waiting until at least one is.

        Raises:
          TimeoutError: none was ready by `deadline`; names `what` is awaited, and from
            which of the `actors` (indices), if given.
        """
        while True:
            ready, _ = ray.wait(refs, num_returns=1, timeout=_WAIT_INTERVAL)
            if ready:
                return ready
            if time.monotonic() > deadline:
                raise self.timeout_error(what, actors)

    def timeout_error(self, what: str, actors=()) -> TimeoutError:
        """The error for no result in `timeout` seconds, naming the `actors` (indices)."""
        source = f"Ray {self.kind}s"
        if actors:
            indices = sorted(set(actors))
            noun = self.kind if len(indices) == 1 else f"{self.kind}s"
            source = f"Ray {noun} {', '.join(map(str, indices))}"
        return TimeoutError(
            f"No result from {source} for {self.timeout:.0f} s (ray.timeout) while "
            f"waiting for {what}; restarts so far: {self.restarts}. Are the actors "
            "pending for want of CPUs (ray.cpus_per_actor), or a node lost?"
        )

    def gather(self, call: Callable[[int, object], object], what: str) -> list:
        """`ray.get(call(index, handle))` for every actor, in index order.

        An actor whose call fails is replaced (`replace`) and the replacement called again.

        Raises:
          RuntimeError: as `replace`.
          TimeoutError: some actor gave no result for `timeout` seconds; names it.
        """
        calls = {}  # ObjectRef -> (actor index, handle)

        def send(index: int) -> None:
            handle = self.handles[index]
            calls[call(index, handle)] = (index, handle)

        for index in range(len(self.handles)):
            send(index)
        results = {}
        deadline = time.monotonic() + self.timeout
        while calls:
            awaited = [index for index, _ in calls.values()]
            for ref in self.wait(list(calls), what, deadline, awaited):
                index, handle = calls.pop(ref)
                try:
                    results[index] = ray.get(ref)
                except ray.exceptions.RayError as error:
                    self.replace(index, handle, error)
                    send(index)
        return [results[index] for index in range(len(self.handles))]

    def close(self) -> None:
        """Kills the actors; their environment workers exit with them."""
        for handle in self.handles:
            try:
                ray.kill(handle, no_restart=True)
            except Exception as error:  # noqa: BLE001  # One that is gone already is fine.
                logger.debug("ray.kill: %s", error)
        self.handles = []


_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # Ray colours the task names in its tracebacks.


def _raised(error: BaseException) -> str | None:
    """'Type: message' of an exception that an actor's code raised; None for a death.

    A method's exception arrives as a `RayTaskError` carrying it; one of the constructor
    as a `RayActorError` whose text ends with it.
    """
    if isinstance(error, ray.exceptions.RayTaskError) and error.cause is not None:
        return f"{type(error.cause).__name__}: {error.cause}".strip()
    if getattr(error, "actor_init_failed", False):
        lines = _ANSI.sub("", str(error)).strip().splitlines()
        return lines[-1].strip() if lines else None
    return None


def _first_line(error: BaseException) -> str:
    lines = _ANSI.sub("", str(error)).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


def merge_episode_stats(parts: list[dict]) -> tuple[int, dict]:
    """The environment steps and finished-episode statistics of several `simulate` calls.

    Each part holds `steps`, `episodes`, `mean_return` and `mean_length` (NaN when none
    ended), as `simulate` returns them; the means are weighted by the episodes.
    """
    episodes = np.array([float(part["episodes"]) for part in parts])
    weights = episodes / max(episodes.sum(), 1.0)
    if not episodes.sum():
        mean_return = mean_length = float("nan")
    else:
        mean_return, mean_length = (
            float(sum(w * float(p[key]) for w, p in zip(weights, parts) if w))
            for key in ("mean_return", "mean_length")
        )
    stats = {
        "episodes": int(episodes.sum()),
        "mean_return": mean_return,
        "mean_length": mean_length,
    }
    return int(sum(int(part["steps"]) for part in parts)), stats
