"""A group of Ray actors (start, restart, timeouts, shutdown), and the runners built on groups."""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Iterator
from typing import TypedDict, Unpack

import ray

from batchrl.config import ConfigError
from batchrl.config.run_config import algorithm_section
from batchrl.runners.restarts import Restarts, first_line

logger = logging.getLogger("batchrl.runners.ray")

# Seconds one `ray.wait` blocks before the learner checks its deadline.
WAIT_INTERVAL = 1.0
# Seconds at least that a group's actors have to be built (a worker process starts and
# imports TensorFlow), whatever shorter `timeout` its results have.
START_TIMEOUT = 120.0
# Seed steps: actor i of a group starts from seed + stride * i, plus this per restart.
_RESTART_SEED = 100_000


class ActorOptions(TypedDict, total=False):
    """How every Ray runner starts its actors: the `ray` section's keys of that name."""

    cpus_per_actor: float  # Ray CPUs each actor reserves.
    tf_threads: int  # TensorFlow intra-op threads in each actor.
    max_actor_restarts: int  # Failed actors replaced before the runner raises.
    seed: int  # Actor i's environments and samples start from seed + 1000 i.
    timeout: float  # Seconds a wait for an actor's result lasts before it raises.


class ActorGroup:
    """Ray actors of one class, their replacement when they die, their timeouts and end.

    Actor i is `actor_cls.remote(*make_args(i, seed_i))` with `cpus` CPUs, spread over the
    nodes (Ray's SPREAD strategy); `seed_i = seed + seed_stride * i`, plus 100,000 per
    restart so far. A failed call is logged and its actor replaced (`replace`), up to
    `max_restarts` times in all, and the work it lost counted (`lost`); an exception
    raised by the actor's own code is logged with its remote traceback the first time,
    and stops the run when a replaced actor raises it again, since a restart cannot fix a
    bug. Every wait (`wait`, `gather`) raises TimeoutError after `timeout` seconds, naming
    the actors awaited. `close` (also as a context manager) kills every actor. `kind`
    names them in messages ("actor", "replay shard").

        with ActorGroup(Worker, lambda index, seed: (config, seed), 4) as group:
            results = group.gather(lambda index, handle: handle.work.remote(), "work")
    """

    def __init__(
        self,
        actor_cls,
        make_args: Callable[[int, int], tuple],
        count: int,
        *,
        cpus_per_actor: float = 1.0,
        max_actor_restarts: int = 10,
        timeout: float = 300.0,
        seed: int = 0,
        seed_stride: int = 1000,
        kind: str = "actor",
    ):
        """Starts `count` actors; Ray must be connected (`connect`).

        Args:
          actor_cls: a Ray actor class (`@ray.remote(max_restarts=0)`).
          make_args: (index, seed) -> the arguments actor `index` is built with.
          count: actors.
          cpus_per_actor, max_actor_restarts, timeout, seed: as `ActorOptions`.
          seed_stride: the seeds of actors i and i + 1 differ by this much.
          kind: what the actors are, for messages ("actor", "replay shard").
        """
        self._actor_cls = actor_cls
        self._make_args = make_args
        self._cpus = cpus_per_actor
        self._seed = seed
        self._stride = seed_stride
        self.kind = kind
        self.timeout = timeout
        self._restarts = Restarts(max_actor_restarts, f"Ray {kind}", "ray.max_actor_restarts")
        self._replaced: set[int] = set()  # Indices whose actor is a replacement.
        self._errors: set[str] = set()  # The exceptions that actors' code raised so far.
        self.handles: list = []
        try:
            self.handles = [self._start(index) for index in range(count)]
            self._await_placed()
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> ActorGroup:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    @property
    def restarts(self) -> int:
        """Actors replaced so far."""
        return self._restarts.restarts

    @property
    def lost(self) -> int:
        """Calls whose work failed actors lost (each failed call that reached `replace`)."""
        return self._restarts.lost

    def _start(self, index: int):
        seed = self._seed + self._stride * index + _RESTART_SEED * self.restarts
        options = dict(num_cpus=self._cpus, scheduling_strategy="SPREAD")
        return self._actor_cls.options(**options).remote(*self._make_args(index, seed))

    def _await_placed(self) -> None:
        """Waits until every actor is built (placed on a node, its constructor run).

        Raises:
          TimeoutError: some were not built in `timeout` seconds (`START_TIMEOUT` at least);
            names them, the CPUs each reserves and the cluster's. An actor Ray cannot
            place waits forever otherwise, and its calls with it: Ape-X's adds to an
            unplaced shard never finished, so a run collected for hours and learned
            nothing.
        """
        seconds = max(self.timeout, START_TIMEOUT)
        self.gather(lambda index, handle: handle.__ray_ready__.remote(), "their start", seconds)

    def replace(self, index: int, handle, error: BaseException) -> bool:
        """Counts the work of a failed call lost, and replaces actor `index` if `handle`
        is still it; returns whether it did.

        Raises:
          RuntimeError: actors failed more than `max_restarts` times, or a replaced actor
            raised the same exception as an actor before it.
        """
        self._restarts.lose()
        if self.handles[index] is not handle:
            return False  # Replaced already, on an earlier failed call.
        ray.kill(handle, no_restart=True)
        raised = _raised(error)
        if raised is not None and raised in self._errors and index in self._replaced:
            raise RuntimeError(
                f"Ray {self.kind} {index}, a replacement, raised {raised} again: restarting does "
                "not fix an error in the actors' code or environments, so training stops "
                "(the remote traceback was logged at its first failure)."
            ) from error
        traceback = ""
        if raised is not None and raised not in self._errors:
            self._errors.add(raised)
            traceback = "\n" + _ANSI.sub("", str(error)).strip()
        self._restarts.count(index, raised or _ANSI.sub("", first_line(error)), error, traceback)
        self.handles[index] = self._start(index)
        self._replaced.add(index)
        return True

    def wait(self, refs: list, what: str, deadline: float, actors=(), seconds=None) -> list:
        """The refs of `refs` that are ready, waiting until at least one is.

        Raises:
          TimeoutError: none was ready by `deadline`; as `timeout_error`.
        """
        while True:
            ready, _ = ray.wait(refs, num_returns=1, timeout=WAIT_INTERVAL)
            if ready:
                return ready
            if time.monotonic() > deadline:
                raise self.timeout_error(what, actors, seconds)

    def timeout_error(self, what: str, actors=(), seconds=None) -> TimeoutError:
        """The error for no result in `seconds` (`timeout` by default) while waiting for
        `what`: names the `actors` (indices), the CPUs each reserves and the cluster's."""
        source = f"Ray {self.kind}s"
        if actors:
            indices = sorted(set(actors))
            noun = self.kind if len(indices) == 1 else f"{self.kind}s"
            source = f"Ray {noun} {', '.join(map(str, indices))}"
        seconds = self.timeout if seconds is None else seconds
        limit = "ray.timeout" if seconds == self.timeout else "the time to start"
        cluster = ""
        if ray.is_initialized():  # An error about a wait must not fail for want of Ray.
            cluster = f" and the cluster has {ray.cluster_resources().get('CPU', 0.0):g} in all"
        return TimeoutError(
            f"No result from {source} for {seconds:.0f} s ({limit}) while waiting for "
            f"{what}; restarts so far: {self.restarts}. Each reserves {self._cpus:g} CPUs"
            f"{cluster}: are they pending for want of CPUs, or a node lost?"
        )

    def gather(self, call: Callable[[int, object], object], what: str, seconds=None) -> list:
        """`ray.get(call(index, handle))` for every actor, in index order.

        An actor whose call fails is replaced (`replace`) and the replacement called again.

        Raises:
          RuntimeError: as `replace`.
          TimeoutError: some actor gave no result within `seconds` (`timeout` by default);
            names it.
        """
        seconds = self.timeout if seconds is None else seconds
        calls = {}  # ObjectRef -> (actor index, handle)

        def send(index: int) -> None:
            handle = self.handles[index]
            calls[call(index, handle)] = (index, handle)

        for index in range(len(self.handles)):
            send(index)
        results = {}
        deadline = time.monotonic() + seconds
        while calls:
            awaited = [index for index, _ in calls.values()]
            for ref in self.wait(list(calls), what, deadline, awaited, seconds):
                index, handle = calls.pop(ref)
                try:
                    results[index] = ray.get(ref)
                except ray.exceptions.RayError as error:
                    self.replace(index, handle, error)
                    send(index)
        return [results[index] for index in range(len(self.handles))]

    def close(self) -> None:
        """Kills the actors; their environment workers exit with them. Safe to call twice."""
        for handle in self.handles:
            try:
                ray.kill(handle, no_restart=True)
            except Exception as error:  # noqa: BLE001  # One that is gone already is fine.
                logger.debug("ray.kill: %s", error)
        self.handles = []


class RayRunner:
    """A runner of the ray runner: its groups of actors, closed together, and its shape.

    A subclass is one shape of distribution an algorithm may need (samplers feeding one
    learner; actors with a learner and policy lag; actors and replay shards; an
    evaluator pool). It starts its groups with `start_group` inside `closing_on_error`,
    so that a failed start kills what did start, and it writes `step` (one unit of work:
    an update or a generation); `close` (also as a context manager) kills every group.
    Its classmethods are what `RayTrainer` asks of a shape: `check_config`,
    `algorithm_config`, `make_batch_env` and `from_config`.
    """

    def __init__(self, **options: Unpack[ActorOptions]):
        unknown = set(options) - set(ActorOptions.__annotations__)
        if unknown:
            raise TypeError(
                f"Unknown actor options {sorted(unknown)}; valid: "
                f"{', '.join(ActorOptions.__annotations__)}."
            )
        self.options = ActorOptions(**options)
        self._groups: list[ActorGroup] = []

    @classmethod
    def check_config(cls, config, algo_cls) -> None:
        """Raises ConfigError when the algorithm's config cannot run in this shape: here,
        unless its actors can step Gymnasium's environments."""
        if config.env.backend != "gymnasium" or config.train.jit_compile:
            raise ConfigError(
                "runner.name='ray' steps Gymnasium environments in Ray actors for "
                f"{config.algorithm.name!r}: it needs env.backend='gymnasium' and "
                "train.jit_compile=false."
            )

    @classmethod
    def algorithm_config(cls, config):
        """The config the learner is built with here."""
        return config

    @classmethod
    def make_batch_env(cls, config, seed: int):
        """What the algorithm is built with here (the actors step environments of their own)."""
        raise NotImplementedError

    @classmethod
    def cpus_needed(cls, config) -> float:
        """The Ray CPUs this shape's actors reserve in all (a Ray started here has at least
        as many): `ray.num_actors` x `ray.cpus_per_actor`."""
        return config.ray.num_actors * config.ray.cpus_per_actor

    @classmethod
    def from_config(cls, config, algo, seed: int) -> RayRunner:
        """The runner of the run: the `ray` section's actors for `algo`."""
        raise NotImplementedError

    def step(self) -> tuple[int, dict]:
        """One unit of work; returns its environment steps and episode statistics."""
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def start_group(
        self, actor_cls, make_args: Callable[[int, int], tuple], count: int, **kwargs
    ) -> ActorGroup:
        """An `ActorGroup` with this runner's options (`kwargs` override), closed with it."""
        options = {key: value for key, value in self.options.items() if key != "tf_threads"}
        group = ActorGroup(actor_cls, make_args, count, **{**options, **kwargs})
        self._groups.append(group)
        return group

    @property
    def tf_threads(self) -> int:
        return self.options.get("tf_threads", 1)

    @contextlib.contextmanager
    def closing_on_error(self) -> Iterator[None]:
        """Closes the runner (kills every actor started) if the block raises."""
        try:
            yield
        except BaseException:
            self.close()
            raise

    @property
    def actors(self) -> list:
        """The handles of the first group's actors, by index (a replaced one has a new handle)."""
        return self._groups[0].handles if self._groups else []

    @property
    def restarts(self) -> int:
        """Replacements of the first group's actors."""
        return self._groups[0].restarts if self._groups else 0

    def close(self) -> None:
        """Kills the actors of every group (their environment workers exit with them)."""
        for group in self._groups:
            group.close()


def options_of(config, seed: int) -> ActorOptions:
    """The `ActorOptions` of the config's `ray` section, with `seed`."""
    cfg = config.ray
    return ActorOptions(
        cpus_per_actor=cfg.cpus_per_actor,
        tf_threads=cfg.tf_threads,
        max_actor_restarts=cfg.max_actor_restarts,
        timeout=cfg.timeout,
        seed=seed,
    )


def require_key(config, key: str) -> None:
    """Raises ConfigError unless the algorithm's section has `key`, which a runner reads."""
    section = algorithm_section(config)
    if key not in config[section]:
        raise ConfigError(
            f"runner.name='ray' reads {key} from the {section!r} section, which has none."
        )


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
