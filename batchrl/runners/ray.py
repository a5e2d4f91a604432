"""The ray runner: IMPALA's actors or ES's workers are Ray actors, on one machine or a cluster."""

from __future__ import annotations

import functools
import logging
import math
import os
import time
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from batchrl.core import Learner, Trainer
from batchrl.runners.unrolls import Unroll, UnrollCollector, concatenate, episode_stats, stack
from batchrl.tools import summary
from batchrl.tools.config import ConfigError, check_choice
from batchrl.tools.environments import EnvSpaces, make_batch_env, make_in_graph_env
from batchrl.tools.run_config import algorithm_class, algorithm_section, check_range

INSTALL_HINT = 'runner.name=ray needs Ray: pip install -e ".[ray]" (or pip install "ray==2.60.0").'
try:
    import ray
except ImportError as error:  # Reported at config load, where the registry resolves us.
    raise ImportError(INSTALL_HINT) from error

logger = logging.getLogger(__name__)

INFERENCE = ("actor", "central")
# Seconds one `ray.wait` blocks before the learner checks its deadline.
_WAIT_INTERVAL = 1.0


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
        ray.init(address=cfg.address)
    else:
        cpus = max(os.cpu_count() or 1, math.ceil(cpus_needed))
        ray.init(address="local", num_cpus=cpus, include_dashboard=False)
    return True


def _limit_threads(tf_threads: int) -> None:
    """TensorFlow's thread pools of an actor, set before its first op (Ray sets none)."""
    tf.config.threading.set_intra_op_parallelism_threads(tf_threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.set_visible_devices([], "GPU")


@ray.remote(max_restarts=0)
class EnvActor:
    """A Ray actor that owns a batch of environments (an `UnrollCollector`).

    With a behaviour policy (actor-side inference) `unroll` returns whole unrolls; without
    one (central inference) the learner sends actions to `step`.
    """

    def __init__(self, make_env, make_policy, seed: int, tf_threads: int):
        _limit_threads(tf_threads)
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

    def step(self, action) -> tuple[dict, np.ndarray]:
        """One batched step: the transition, and the observations to act on next."""
        return self._collector.step(action), self._collector.observ

    def take_episodes(self) -> tuple[list[float], list[int]]:
        return self._collector.take_episodes()

    def pid(self) -> int:
        return os.getpid()

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def close(self) -> None:
        self._collector.close()


class _Actors:
    """Ray actors of one kind, their replacement when they die, and their end.

    Actors are spread over the nodes (Ray's SPREAD strategy). A failed call is logged and
    its actor replaced, up to `max_restarts` times in all; `close` kills every actor.
    """

    def __init__(self, make_actor: Callable[[int, int], object], max_restarts: int, timeout):
        self._make_actor = make_actor
        self._max_restarts = max_restarts
        self.timeout = timeout
        self.restarts = 0
        self.handles: list = []

    def start(self, count: int) -> None:
        self.handles = [self._make_actor(index, 0) for index in range(count)]

    def replace(self, index: int, handle, error: BaseException) -> bool:
        """Replaces actor `index` if `handle` is still it; returns whether it did.

        Raises:
          RuntimeError: actors failed more than `max_restarts` times.
        """
        if self.handles[index] is not handle:
            return False  # Replaced already, on an earlier failed call.
        ray.kill(handle, no_restart=True)
        self.restarts += 1
        message = str(error).strip().splitlines()
        if self.restarts > self._max_restarts:
            raise RuntimeError(
                f"Ray actor {index} failed, and actors have failed {self.restarts} times in "
                f"all, more than ray.max_actor_restarts={self._max_restarts}. Its error: "
                f"{type(error).__name__}: {message[0] if message else ''}"
            ) from error
        logger.warning(
            "Ray actor %d failed (%s: %s); replacing it (restart %d of at most %d).",
            index,
            type(error).__name__,
            message[0] if message else "",
            self.restarts,
            self._max_restarts,
        )
        self.handles[index] = self._make_actor(index, self.restarts)
        return True

    def wait(self, refs: list, what: str, deadline: float) -> list:
        """The refs of `refs` that are ready, waiting until at least one is.

        Raises:
          TimeoutError: none was ready by `deadline`; names `what` is awaited.
        """
        while True:
            ready, _ = ray.wait(refs, num_returns=1, timeout=_WAIT_INTERVAL)
            if ready:
                return ready
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"No result from Ray actors for {self.timeout:.0f} s (ray.timeout) while "
                    f"waiting for {what}; restarts so far: {self.restarts}. Are the actors "
                    "pending for want of CPUs (ray.cpus_per_actor), or a node lost?"
                )

    def close(self) -> None:
        """Kills the actors; their environment workers exit with them."""
        for handle in self.handles:
            try:
                ray.kill(handle, no_restart=True)
            except Exception as error:  # noqa: BLE001  # One that is gone already is fine.
                logger.debug("ray.kill: %s", error)
        self.handles = []


class RayActorLearner:
    """IMPALA's actor-learner loop with Ray actors, on one machine or a cluster.

    Each of `num_actors` `EnvActor`s owns a batch of environments (from `make_env`) and a
    policy copy (`make_policy(seed)`), and returns whole unrolls [T, B]. The learner keeps
    `requests_per_actor` requests in flight per actor and takes results as they arrive
    (`ray.wait`). Each `update` takes `learner_batch` unrolls, makes one learner step and
    puts the new weights into the object store once; requests sent after that carry
    them. The policy lag of an unroll is the learner version at its update minus the
    version that acted.

    With `inference='central'` actors only step environments: every step, the learner
    acts for all actors' environments in one batched call of its own policy copy and
    sends each actor its actions; an update learns from the T steps of all actors
    together, acted on with the newest weights (lag 0).

    An actor whose call fails (it was killed, its node lost, or an environment raised)
    is logged and replaced on any node with room, up to `max_actor_restarts` times.
    `close` (also as a context manager) kills the actors.
    """

    def __init__(
        self,
        make_env: Callable,
        make_policy: Callable[[int], object],
        learner: Learner,
        num_actors: int,
        unroll_length: int,
        learner_batch: int = 2,
        requests_per_actor: int = 2,
        inference: str = "actor",
        cpus_per_actor: float = 1.0,
        tf_threads: int = 1,
        max_actor_restarts: int = 10,
        seed: int = 0,
        timeout: float = 300.0,
    ):
        """Starts the actors; Ray must be connected (`connect`).

        Args:
          make_env: builds one actor's `BatchEnv`; called in the actor's process.
          make_policy: builds a behaviour policy from a seed; called in each actor with
            actor inference, and once in this process with central inference.
          learner: what learns (e.g. `IMPALA`); its `behaviour_variables` are published.
          num_actors: Ray actors.
          unroll_length: T.
          learner_batch: unrolls per learner step (actor inference).
          requests_per_actor: 1 or 2 unroll requests in flight per actor.
          inference: 'actor' or 'central'.
          cpus_per_actor: Ray CPUs each actor reserves.
          tf_threads: TensorFlow intra-op threads in each actor.
          max_actor_restarts: failed actors replaced before `update` raises.
          seed: actor i's environments and samples start from `seed + 1000 * i` (plus
            100,000 per restart so far).
          timeout: seconds `update` waits for any actor before it raises.
        """
        check_choice("ray.inference", inference, INFERENCE)
        self._learner = learner
        self._learn = tf.function(learner.learn)
        self._unroll_length = unroll_length
        self._batch = learner_batch
        self._requests = requests_per_actor
        self._central = inference == "central"
        self._seed = seed
        self.version = 0
        self._weights = ray.put(self._snapshot())
        self._pending: dict = {}  # ObjectRef -> (actor index, actor handle)
        self._owed: list[int] = []  # Actors to send a request after the update.
        self._observ: list[np.ndarray] | None = None  # Central: each actor's next observ.

        def make_actor(index: int, restarts: int):
            return EnvActor.options(num_cpus=cpus_per_actor, scheduling_strategy="SPREAD").remote(
                make_env,
                None if self._central else make_policy,
                seed + 1000 * index + 100_000 * restarts,
                tf_threads,
            )

        self._actors = _Actors(make_actor, max_actor_restarts, timeout)
        self._policy = make_policy(seed) if self._central else None
        try:
            self._actors.start(num_actors)
            if not self._central:
                for index in range(num_actors):
                    for _ in range(requests_per_actor):
                        self._request(index)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> RayActorLearner:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    @property
    def actors(self) -> list:
        """The handles of the actors, by index (a replaced actor has a new handle)."""
        return self._actors.handles

    @property
    def restarts(self) -> int:
        return self._actors.restarts

    def update(self) -> tuple[int, dict[str, float]]:
        """One learner step on `learner_batch` unrolls (or one central unroll); publishes.

        Writes `impala/policy_lag`, `impala/policy_lag_max` and `impala/actor_restarts`
        to the default summary writer, if there is one.

        Returns:
          The environment steps consumed and the finished-episode statistics.

        Raises:
          RuntimeError: actors failed more than `max_actor_restarts` times.
          TimeoutError: no actor answered for `timeout` seconds.
        """
        if self._central:
            unrolls = [self._central_unroll()]
        else:
            unrolls = [self.next_unroll() for _ in range(self._batch)]
        self._learn(concatenate(unrolls))
        lags = [self.version - unroll.version for unroll in unrolls]
        self.version += 1
        self._weights = ray.put(self._snapshot())
        for index in self._owed:
            self._request(index)
        self._owed = []
        summary.scalar("impala/policy_lag", float(np.mean(lags)))
        summary.scalar("impala/policy_lag_max", float(np.max(lags)))
        summary.scalar("impala/actor_restarts", float(self.restarts))
        steps = sum(unroll.arrays["reward"].size for unroll in unrolls)
        return steps, episode_stats(unrolls, lags)

    def next_unroll(self) -> Unroll:
        """The next unroll of any actor (actor inference), replacing actors that failed.

        The actor it came from gets a new request now if it has none left in flight,
        else after the next update, so that the request carries newer weights.
        """
        deadline = time.monotonic() + self._actors.timeout
        while True:
            for ref in self._actors.wait(list(self._pending), "unrolls", deadline):
                index, handle = self._pending.pop(ref)
                try:
                    arrays, returns, lengths, version = ray.get(ref)
                except ray.exceptions.RayError as error:
                    if self._actors.replace(index, handle, error):
                        self._pending = {
                            key: value
                            for key, value in self._pending.items()
                            if value[1] is not handle
                        }
                        for _ in range(self._requests):
                            self._request(index)
                    continue
                if any(value[0] == index for value in self._pending.values()):
                    self._owed.append(index)
                else:
                    self._request(index)
                return Unroll(arrays, index, version, returns, lengths)

    def close(self) -> None:
        """Kills the actors (their environment workers exit with them); safe to call twice."""
        self._pending = {}
        self._actors.close()

    def _request(self, index: int) -> None:
        handle = self._actors.handles[index]
        ref = handle.unroll.remote(self._weights, self.version, self._unroll_length)
        self._pending[ref] = (index, handle)

    def _snapshot(self) -> list[np.ndarray]:
        return [variable.numpy() for variable in self._learner.behaviour_variables()]

    def _central_unroll(self) -> Unroll:
        """T steps of every actor, acted on here in one call per step; restarts on a failure."""
        self._policy.load(self._snapshot())
        deadline = time.monotonic() + self._actors.timeout
        while True:
            try:
                return self._try_central_unroll(deadline)
            except _ActorFailed as failure:
                self._actors.replace(failure.index, failure.handle, failure.error)
                self._observ = None  # Start the unroll again, from the actors' observations.

    def _try_central_unroll(self, deadline: float) -> Unroll:
        handles = list(self._actors.handles)
        if self._observ is None:
            self._observ = self._gather(handles, [h.observ.remote() for h in handles], deadline)
        sizes = [len(observ) for observ in self._observ]
        splits = np.cumsum(sizes)[:-1]
        steps = []
        for _ in range(self._unroll_length):
            action, sample, output = self._policy(np.concatenate(self._observ))  # [sum B, ...]
            refs = [h.step.remote(a) for h, a in zip(handles, np.split(action, splits))]
            results = self._gather(handles, refs, deadline)
            transition = {
                key: np.concatenate([result[0][key] for result in results]) for key in results[0][0]
            }
            self._observ = [result[1] for result in results]
            steps.append(dict(transition, sample=sample, output=output))
        episodes = self._gather(handles, [h.take_episodes.remote() for h in handles], deadline)
        arrays = self._policy.finish_unroll(stack(steps))
        returns = [value for returns, _ in episodes for value in returns]
        lengths = [value for _, lengths in episodes for value in lengths]
        return Unroll(arrays, -1, self.version, returns, lengths)

    def _gather(self, handles: list, refs: list, deadline: float) -> list:
        """The results of one call per actor, in order; raises _ActorFailed for a failed one."""
        waiting = list(refs)
        while waiting:
            for ref in self._actors.wait(waiting, "a central step", deadline):
                waiting.remove(ref)
        results = []
        for index, (handle, ref) in enumerate(zip(handles, refs)):
            try:
                results.append(ray.get(ref))
            except ray.exceptions.RayError as error:
                raise _ActorFailed(index, handle, error) from error
        return results


class _ActorFailed(Exception):
    def __init__(self, index, handle, error):
        super().__init__(str(error))
        self.index, self.handle, self.error = index, handle, error


@ray.remote(max_restarts=0)
class PopulationWorker:
    """A Ray actor that evaluates slices of ES's population, batched in one graph call.

    It builds the algorithm from the config (`algorithm_class(config)`), and for each
    call takes theta and the observation statistics of the generation, regenerates the
    members' noise from (seed, generation, member) and runs their first episodes in its
    own environments, as `GenerationTrainer` does for the whole population.
    """

    def __init__(self, config, make_env, seed: int, env_seed: int, tf_threads: int):
        _limit_threads(tf_threads)
        self._config = config
        self._make_env = make_env
        self._env_seed = env_seed
        self._algo = algorithm_class(config)(make_env(config, 1, env_seed), config, seed=seed)
        # Action noise of its own: workers built alike would otherwise draw the same.
        self._algo._rng.reset_from_seed(env_seed)
        self._evaluators = {}

    def evaluate(self, theta, statistics, generation: int, start: int, stop: int):
        """Fitness [stop - start] of members start..stop-1, the episode statistics, and the
        observation statistics after the slice's observations were merged in."""
        algo = self._algo
        algo.strategy.theta.assign(theta)
        normalizer = algo.observ_normalizer
        if normalizer is not None:
            for variable, value in zip(normalizer.variables, statistics, strict=True):
                variable.assign(value)
        size = (stop - start) * self._config.es.episodes_per_member
        if size not in self._evaluators:
            env = self._make_env(self._config, size, self._env_seed)
            self._evaluators[size] = algo.make_evaluator(env, training=True)
        fitness, stats = self._evaluators[size](algo.strategy.members(start, stop, generation))
        after = [] if normalizer is None else [v.numpy() for v in normalizer.variables]
        return fitness.numpy(), {key: value.numpy() for key, value in stats.items()}, after

    def pid(self) -> int:
        return os.getpid()

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()


def _make_es_env(config, size: int, seed: int):
    return make_in_graph_env(config.env, size, seed)


class RayPopulation:
    """ES generations with Ray workers: ask, evaluate slices remotely, gather, tell.

    The 2N members are split into `num_workers` contiguous slices; worker i evaluates
    slice i of every generation (`PopulationWorker.evaluate`) from theta, which is put
    into the object store once per generation. The fitness is gathered in member order,
    shaped and told here (`Strategy.tell`), so with the same seed the parameters are
    those of single-process ES whenever the members' episodes are the same (the
    environments' initial states and the action noise are the workers' own). The
    observation statistics each worker gathered are merged into the algorithm's.

    A worker that fails is logged and replaced, and its slice evaluated again by the
    replacement, up to `max_actor_restarts` times.
    """

    def __init__(
        self,
        config,
        algo,
        num_workers: int,
        cpus_per_actor: float = 1.0,
        tf_threads: int = 1,
        max_actor_restarts: int = 10,
        seed: int = 0,
        timeout: float = 300.0,
        make_env: Callable = _make_es_env,
    ):
        """Starts the workers; Ray must be connected (`connect`).

        Args:
          config: the run's config (the workers build their ES from it).
          algo: the `ES` that holds theta and learns.
          num_workers: Ray actors, at most 2N.
          cpus_per_actor, tf_threads, max_actor_restarts, timeout: as `RayActorLearner`.
          seed: the seed of the algorithm (theta's noise), as `train.seed`.
          make_env: `(config, size, seed)` -> the in-graph environments of a slice.
        """
        self._algo = algo
        members = 2 * algo.strategy.pairs
        if not 1 <= num_workers <= members:
            raise ValueError(f"{num_workers} workers for {members} members: use 1 to {members}.")
        bounds = np.linspace(0, members, num_workers + 1).round().astype(int)
        self.slices = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))

        def make_worker(index: int, restarts: int):
            env_seed = seed + 1000 * (index + 1) + 100_000 * restarts
            options = dict(num_cpus=cpus_per_actor, scheduling_strategy="SPREAD")
            return PopulationWorker.options(**options).remote(
                config, make_env, seed, env_seed, tf_threads
            )

        self._workers = _Actors(make_worker, max_actor_restarts, timeout)
        try:
            self._workers.start(num_workers)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> RayPopulation:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    @property
    def workers(self) -> list:
        return self._workers.handles

    @property
    def restarts(self) -> int:
        return self._workers.restarts

    def step(self) -> tuple[int, dict]:
        """One generation; returns its environment steps and episode statistics."""
        strategy, normalizer = self._algo.strategy, self._algo.observ_normalizer
        generation = int(strategy.generation)
        before = [] if normalizer is None else [v.numpy() for v in normalizer.variables]
        theta = ray.put(strategy.theta.numpy())
        statistics = ray.put(before)
        calls = {}  # ObjectRef -> (worker index, handle)

        def send(index: int) -> None:
            handle = self._workers.handles[index]
            start, stop = self.slices[index]
            calls[handle.evaluate.remote(theta, statistics, generation, start, stop)] = (
                index,
                handle,
            )

        for index in range(len(self.slices)):
            send(index)
        results = {}
        deadline = time.monotonic() + self._workers.timeout
        while calls:
            for ref in self._workers.wait(list(calls), f"generation {generation}", deadline):
                index, handle = calls.pop(ref)
                try:
                    results[index] = ray.get(ref)
                except ray.exceptions.RayError as error:
                    self._workers.replace(index, handle, error)
                    send(index)
        ordered = [results[index] for index in range(len(self.slices))]
        fitness = np.concatenate([result[0] for result in ordered])
        if normalizer is not None:
            merged = merge_statistics(before, [result[2] for result in ordered])
            for variable, value in zip(normalizer.variables, merged, strict=True):
                variable.assign(value)
        for name, value in strategy.tell(fitness).items():
            summary.scalar(f"es/{name}", value)
        return _population_stats([result[1] for result in ordered])

    def close(self) -> None:
        self._workers.close()


def merge_statistics(before: list, after: list[list]) -> list[np.ndarray]:
    """Running statistics with each worker's new observations merged in.

    `before` and each of `after` are the values of a `StreamingNormalizer`'s variables
    (count n, M2, mean, in `variables` order). Worker k started from `before` and merged
    its observations in, ending at `after[k]`; its observations alone had

        n_k = n'_k - n,   mean_k = (n'_k mean'_k - n mean) / n_k,
        M2_k = M2'_k - M2 - (mean_k - mean)^2 n n_k / n'_k,

    and these are merged into `before` one after another with the parallel algorithm
    of Chan, Golub and LeVeque (1979), as `StreamingNormalizer.update` merges a batch.
    """
    count, m2, mean = (np.asarray(value, np.float64) for value in before)
    total_count, total_m2, total_mean = count, m2, mean
    for worker_count, worker_m2, worker_mean in after:
        n_k = worker_count - count
        if n_k <= 0:
            continue
        mean_k = (worker_count * worker_mean - count * mean) / n_k
        m2_k = worker_m2 - m2 - np.square(mean_k - mean) * count * n_k / worker_count
        merged = total_count + n_k
        delta = mean_k - total_mean
        total_mean = total_mean + delta * n_k / merged
        total_m2 = total_m2 + m2_k + np.square(delta) * total_count * n_k / merged
        total_count = merged
    return [np.asarray(total_count), total_m2, total_mean]


def _population_stats(parts: list[dict]) -> tuple[int, dict]:
    episodes = np.array([float(part["episodes"]) for part in parts])
    weights = episodes / max(episodes.sum(), 1.0)
    stats = {
        "episodes": int(episodes.sum()),
        "mean_return": float(sum(w * float(p["mean_return"]) for w, p in zip(weights, parts))),
        "mean_length": float(sum(w * float(p["mean_length"]) for w, p in zip(weights, parts))),
    }
    return int(sum(int(part["steps"]) for part in parts)), stats


def make_behaviour_policy(config, seed: int):
    """A behaviour policy of the config's algorithm, as an actor builds it in its process."""
    spaces = EnvSpaces(config.env, config.env.num_envs)
    algo = algorithm_class(config)(spaces, config, seed=config.train.seed)
    return algo.make_behaviour_policy(seed)


def _is_population(algo_cls) -> bool:
    return hasattr(algo_cls, "evaluate_members") and hasattr(algo_cls, "make_evaluator")


class RayTrainer(Trainer):
    """Runner `ray`: IMPALA's actors (`RayActorLearner`) or ES's workers (`RayPopulation`).

    Reads the `ray` section. It starts Ray on this machine for the run when `ray.address`
    is empty (and stops it at `close`), or joins the cluster at `ray.address`; in a
    process already connected to Ray it uses that connection. Every `step` is one
    learner update (IMPALA) or one generation (ES). The algorithm, its checkpoints and
    evaluation stay in this process, so checkpoints and resume are those of the other
    runners.
    """

    # The train script takes this runner's environments and trainer even for an algorithm
    # that brings its own (ES): spreading its work is what this runner is for.
    runs_algorithm_work = True

    @classmethod
    def check_config(cls, config, algo_cls) -> None:
        """Raises ConfigError when the `ray` section or the algorithm cannot run on Ray."""
        cfg = config.ray
        check_choice("ray.inference", cfg.inference, INFERENCE)
        check_range(
            cfg,
            "ray",
            {
                "num_actors": (lambda x: x >= 1, ">= 1"),
                "cpus_per_actor": (lambda x: x > 0, "> 0"),
                "tf_threads": (lambda x: x >= 1, ">= 1"),
                "learner_batch": (lambda x: x >= 1, ">= 1"),
                "requests_per_actor": (lambda x: x in (1, 2), "1 or 2"),
                "max_actor_restarts": (lambda x: x >= 0, ">= 0"),
                "timeout": (lambda x: x > 0, "> 0 seconds"),
            },
        )
        address = cfg.address
        host, _, port = address.rpartition(":")
        if address not in ("", "auto") and not (host and port.isdigit()):
            raise ConfigError(
                f"Invalid ray.address={address!r}; it must be empty (start Ray on this "
                "machine), 'auto' (the cluster this machine's `ray start` joined) or "
                "host:port of a cluster's head (e.g. 10.0.0.1:6379)."
            )
        name = config.algorithm.name
        if _is_population(algo_cls):
            members = 2 * config[algorithm_section(config)].population
            if cfg.num_actors > members:
                raise ConfigError(
                    f"Invalid ray.num_actors={cfg.num_actors}; ES's {members} members give "
                    f"work to at most {members} workers."
                )
            return
        if getattr(algo_cls, "make_behaviour_policy", None) in (
            None,
            Learner.make_behaviour_policy,
        ):
            raise ConfigError(
                f"runner.name='ray' runs an algorithm with a behaviour policy for its actors "
                f"(a Learner, as impala) or a population (es); algorithm.name={name!r} is "
                "neither. Use runner.name='local'."
            )
        if "unroll_length" not in config[algorithm_section(config)]:
            raise ConfigError(
                f"runner.name='ray' reads unroll_length from the {name!r} section, which has none."
            )
        if config.env.backend != "gymnasium" or config.train.jit_compile:
            raise ConfigError(
                "runner.name='ray' steps Gymnasium environments in Ray actors for "
                f"{name!r}: it needs env.backend='gymnasium' and train.jit_compile=false."
            )

    @classmethod
    def make_batch_env(cls, config, seed: int):
        """What the algorithm is built with here; the actors step environments of their own.

        IMPALA gets the spaces only. ES gets its own training environments when they are
        TensorFlow ops (cheap, and their state is checkpointed, so a run can resume with
        another runner); with Gymnasium's it gets one environment, for the spaces.
        """
        algo_cls = algorithm_class(config)
        if not _is_population(algo_cls):
            return EnvSpaces(config.env, config.env.num_envs)
        if config.env.backend == "tensorflow":
            return algo_cls.make_batch_env(config, seed)
        return make_in_graph_env(config.env, 1, seed)

    def __init__(self, config, algo, batch_env=None, seed: int = 0):
        del batch_env  # The actors build their own.
        cfg = config.ray
        self._runner = None
        self._connected = connect(cfg, cfg.num_actors * cfg.cpus_per_actor)
        common = dict(
            cpus_per_actor=cfg.cpus_per_actor,
            tf_threads=cfg.tf_threads,
            max_actor_restarts=cfg.max_actor_restarts,
            timeout=cfg.timeout,
        )
        try:
            if _is_population(type(algo)):
                self._runner = RayPopulation(
                    config, algo, cfg.num_actors, seed=config.train.seed, **common
                )
            else:
                self._runner = RayActorLearner(
                    functools.partial(make_batch_env, config.env, config.env.num_envs),
                    functools.partial(make_behaviour_policy, config),
                    algo,
                    num_actors=cfg.num_actors,
                    unroll_length=config[algorithm_section(config)].unroll_length,
                    learner_batch=cfg.learner_batch,
                    requests_per_actor=cfg.requests_per_actor,
                    inference=cfg.inference,
                    seed=seed,
                    **common,
                )
        except BaseException:
            self.close()
            raise

    @property
    def runner(self) -> RayActorLearner | RayPopulation:
        return self._runner

    def step(self) -> tuple[int, dict]:
        if isinstance(self._runner, RayPopulation):
            return self._runner.step()
        return self._runner.update()

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
            self._runner = None
        if self._connected:
            ray.shutdown()
            self._connected = False
