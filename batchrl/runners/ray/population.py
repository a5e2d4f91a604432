"""ES over Ray: workers evaluate slices of the population; the trainer tells."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Unpack

import numpy as np
import ray

from batchrl.algorithms.es.es import check_shared_streams, common_seed, common_streams
from batchrl.config import ConfigError
from batchrl.config.run_config import algorithm_class, algorithm_section
from batchrl.parts import summary
from batchrl.runners.ray.actors import limit_threads, merge_episode_stats
from batchrl.runners.ray.group import ActorOptions, RayRunner, options_of
from batchrl.tools.environments import make_in_graph_env


@ray.remote(max_restarts=0)
class PopulationWorker:
    """A Ray actor that evaluates slices of ES's population, batched in one graph call.

    It builds the algorithm from the config (`algorithm_class(config)`), and for each
    call takes theta and the observation statistics of the generation, regenerates the
    noise of a slice of pairs from (seed, generation, pair) and runs the first episodes
    of their members and mirrors in its own environments, as `GenerationTrainer` does
    for the whole population; with common random numbers, on the streams the
    environments of those members have there.
    """

    def __init__(self, config, make_env, seed: int, env_seed: int, tf_threads: int):
        limit_threads(tf_threads)
        self._config = config
        self._make_env = make_env
        self._env_seed = env_seed
        self._algo = algorithm_class(config)(make_env(config, 1, env_seed), config, seed=seed)
        # Action noise of its own: workers built alike would otherwise draw the same.
        self._algo._rng.reset_from_seed(env_seed)
        self._evaluators = {}

    def evaluate(
        self,
        theta,
        statistics,
        generation: int,
        start: int,
        stop: int,
        stream_seed: int | None = None,
    ):
        """Fitness [2 (stop - start)] of pairs start..stop-1 (the members, then their
        mirrors: `Strategy.pair_members`), the episode statistics, the observation
        statistics after the slice's observations were merged in, and the seconds this
        call took in the worker (building a new slice size's evaluator included).

        With `stream_seed` (common random numbers), agent e of pair i and of its mirror
        play on stream i E + e from that seed, as in the whole population's batch
        (`common_streams`, `GenerationTrainer`).
        """
        start_time = time.perf_counter()
        algo = self._algo
        algo.strategy.theta.assign(theta)
        normalizer = algo.observ_normalizer
        if normalizer is not None:
            for variable, value in zip(normalizer.variables, statistics, strict=True):
                variable.assign(value)
        size = 2 * (stop - start) * self._config.es.episodes_per_member
        if size not in self._evaluators:
            env = self._make_env(self._config, size, self._env_seed)
            self._evaluators[size] = env, algo.make_evaluator(env, training=True)
        env, evaluator = self._evaluators[size]
        if stream_seed is not None:
            check_shared_streams(self._config, env)
            env.restart_streams(stream_seed, common_streams(stop - start, size, start))
        fitness, stats = evaluator(algo.strategy.pair_members(start, stop, generation))
        after = [] if normalizer is None else [v.numpy() for v in normalizer.variables]
        fitness, stats = fitness.numpy(), {key: value.numpy() for key, value in stats.items()}
        return fitness, stats, after, time.perf_counter() - start_time

    def pid(self) -> int:
        return os.getpid()

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()


def _make_es_env(config, size: int, seed: int):
    return make_in_graph_env(config.env, size, seed)


class RayPopulation(RayRunner):
    """ES generations with Ray workers: ask, evaluate slices remotely, gather, tell.

    The N mirrored pairs are split into `num_workers` contiguous slices, cut at pair
    boundaries: worker i evaluates the members of slice i and their mirrors in every
    generation (`PopulationWorker.evaluate`), from theta, which is put into the object
    store once per generation. The fitness is gathered in member order, shaped and told
    here (`Strategy.tell`), so with the same seed the parameters are those of
    single-process ES whenever the members' episodes are the same. With
    `es.common_random_numbers` they are: each generation's streams come from
    `common_seed(streams_seed, generation)`, and every agent plays on the stream it has
    in `GenerationTrainer`'s batch, a member beside its mirror in one worker's batch
    (also sharing the action noise with `es.common_action_noise`). Otherwise the
    environments' initial states are the workers' own; so is the action noise. The
    observation statistics each worker gathered are merged into the algorithm's.

    A worker that fails is logged and replaced, and its slice evaluated again by the
    replacement, up to `max_actor_restarts` times.

    `timing` holds the last generation's parts, in seconds: `workers` (each worker's own
    time in `evaluate`), `gather` (from putting theta into the object store to the last
    fitness in hand), `communication` (`gather` less the slowest worker's time: object
    store, scheduling and transfer) and `update` (merging statistics and `tell`); they
    are also written as `es/*_seconds` summaries.
    """

    @classmethod
    def check_config(cls, config, algo_cls) -> None:
        """Raises ConfigError for more workers than mirrored pairs."""
        pairs = config[algorithm_section(config)].population
        if config.ray.num_actors > pairs:
            raise ConfigError(
                f"Invalid ray.num_actors={config.ray.num_actors}; ES's {pairs} mirrored pairs "
                f"give work to at most {pairs} workers (a member and its mirror are "
                f"evaluated by one worker): use 1 to {pairs}."
            )

    @classmethod
    def make_batch_env(cls, config, seed: int):
        """ES's own training environments when they are TensorFlow ops (cheap, and their
        state is checkpointed, so a run can resume with another runner); with Gymnasium's,
        one environment, for the spaces."""
        if config.env.backend == "tensorflow":
            return algorithm_class(config).make_batch_env(config, seed)
        return make_in_graph_env(config.env, 1, seed)

    @classmethod
    def from_config(cls, config, algo, seed: int) -> RayPopulation:
        options = options_of(config, config.train.seed)
        return cls(config, algo, config.ray.num_actors, streams_seed=seed, **options)

    def __init__(
        self,
        config,
        algo,
        num_workers: int,
        make_env: Callable = _make_es_env,
        streams_seed: int | None = None,
        **options: Unpack[ActorOptions],
    ):
        """Starts the workers; Ray must be connected (`connect`).

        Args:
          config: the run's config (the workers build their ES from it).
          algo: the `ES` that holds theta and learns.
          num_workers: Ray actors, at most N.
          make_env: `(config, size, seed)` -> the in-graph environments of a slice.
          streams_seed: with `es.common_random_numbers`, the seed each generation's
            streams derive from, as `GenerationTrainer`'s seed (the train script gives
            both `train.seed` + the step it starts from); None for `seed`.
          **options: of the workers (`ActorOptions`); `seed` is the algorithm's (theta's
            noise), as `train.seed`, and worker i's environments start from
            `seed + 1000 * (i + 1)` (plus 100,000 per restart so far).
        """
        super().__init__(**options)
        self._algo = algo
        pairs = algo.strategy.pairs
        if not 1 <= num_workers <= pairs:
            raise ValueError(
                f"{num_workers} workers for {pairs} mirrored pairs: use 1 to {pairs} (a "
                "member and its mirror are evaluated by one worker)."
            )
        bounds = [index * pairs // num_workers for index in range(num_workers + 1)]
        self.slices = list(zip(bounds[:-1], bounds[1:]))  # pairs [start, stop) of each worker
        self._common = bool(config.es.common_random_numbers)
        seed = self.options.get("seed", 0)
        self._streams_seed = seed if streams_seed is None else int(streams_seed)
        self.timing: dict = {}

        def make_args(index: int, env_seed: int) -> tuple:
            return config, make_env, seed, env_seed, self.tf_threads

        with self.closing_on_error():
            self._workers = self.start_group(
                PopulationWorker, make_args, num_workers, seed=seed + 1000
            )

    def step(self) -> tuple[int, dict]:
        """One generation; returns its environment steps and episode statistics."""
        strategy, normalizer = self._algo.strategy, self._algo.observ_normalizer
        generation = int(strategy.generation)
        start_time = time.perf_counter()
        before = [] if normalizer is None else [v.numpy() for v in normalizer.variables]
        theta = ray.put(strategy.theta.numpy())
        statistics = ray.put(before)
        stream_seed = common_seed(self._streams_seed, generation) if self._common else None

        def evaluate(index: int, handle):
            start, stop = self.slices[index]
            return handle.evaluate.remote(theta, statistics, generation, start, stop, stream_seed)

        ordered = self._workers.gather(evaluate, f"generation {generation}")
        gathered = time.perf_counter()
        pairs = strategy.pairs
        fitness = np.zeros(2 * pairs, np.float32)  # [2N], in member order
        for (start, stop), result in zip(self.slices, ordered, strict=True):
            members, mirrors = np.split(result[0], 2)
            fitness[start:stop] = members
            fitness[pairs + start : pairs + stop] = mirrors
        if normalizer is not None:
            merged = merge_statistics(before, [result[2] for result in ordered])
            for variable, value in zip(normalizer.variables, merged, strict=True):
                variable.assign(value)
        for name, value in strategy.tell(fitness).items():
            summary.scalar(f"es/{name}", value)
        workers = [float(result[3]) for result in ordered]
        self.timing = {
            "workers": workers,
            "gather": gathered - start_time,
            "communication": gathered - start_time - max(workers),
            "update": time.perf_counter() - gathered,
        }
        summary.scalar("es/worker_seconds_max", max(workers))
        for name in ("gather", "communication", "update"):
            summary.scalar(f"es/{name}_seconds", self.timing[name])
        return merge_episode_stats([result[1] for result in ordered])


def merge_statistics(before: list, after: list[list]) -> list[np.ndarray]:
    """Running statistics with each worker's new observations merged in.

    `before` and each of `after` are the values of a `StreamingNormalizer`'s variables
    (count n, M2, mean, in `variables` order). Worker k started from `before` and merged
    its observations in, ending at `after[k]`; its observations alone had

        n_k = n'_k - n,   mean_k = (n'_k mean'_k - n mean) / n_k,
        M2_k = M2'_k - M2 - (mean_k - mean)^2 n n_k / n'_k,

    and these are merged into `after[0]` one after another with the parallel algorithm
    of Chan, Golub and LeVeque (1979), as `StreamingNormalizer.update` merges a batch.
    With one worker the result is `after[0]` exactly.
    """
    count, m2, mean = (np.asarray(value, np.float64) for value in before)
    total_count, total_m2, total_mean = (np.asarray(value, np.float64) for value in after[0])
    for worker_count, worker_m2, worker_mean in after[1:]:
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
