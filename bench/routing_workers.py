"""The routing paper's experiment V-A: time per ES generation and its parts, by Ray workers.

For each preset (`nsfnet_es`, `geant2_es`) and each number of workers W in `--workers`,
ES runs on Ray (`RayPopulation`: the population cut into W slices at pair boundaries,
common random numbers kept) for `--warmup` generations (each worker compiles its slice)
and then `--generations` timed ones. Each timed generation is split into:

- `worker`: the slowest worker's own time in `evaluate` (environment and network fused
  in one XLA call, so measured together);
- `env`: of that, the environment's share, estimated as the slowest worker's steps times
  the time per step of the same `Routing` environments alone, in a batch of the same
  size, driven by SAP (whose episodes are as long as a trained router's) in the same
  kind of XLA loop (`first_episodes`), measured in this process on one thread;
- `network`: `worker` less `env`;
- `communication`: the generation's wall-clock less `worker` and `update` (theta into the
  object store, scheduling, fitness back);
- `update`: shaping the fitness and `tell` (the gradient estimate and Adam) here.

Each worker runs TensorFlow on one thread and reserves one Ray CPU; with more workers
than cores they share the cores, and the table says so. Then the written estimate for a
cluster of one core per worker: the time one worker takes for a slice of 16, 32 and 64
workers' size, measured here on one thread, plus communication fitted as a + b W to the
measured rows, plus the update.

    python bench/routing_workers.py --workers 1 2 4 --json routing_workers.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import harness
import numpy as np
import ray
import tensorflow as tf
from routing_es import build_es
from routing_heuristics import MAX_STEPS

from batchrl.algorithms.es.es import check_shared_streams, common_seed, common_streams
from batchrl.config.run_config import load_run_config
from batchrl.envs.routing import Heuristic, Routing
from batchrl.runners.ray.actors import connect, limit_threads
from batchrl.runners.ray.population import RayPopulation
from batchrl.tools.environments import make_in_graph_env
from batchrl.tools.episodes import EpisodeRecorder, first_episodes

SEED = 0
PRESETS = {"nsfnet_es": "nsfnet", "geant2_es": "geant2"}


def env_seconds_per_step(topology: str, batch_size: int, repeats: int = 3) -> float:
    """Seconds per environment step of `Routing` alone at `batch_size`, driven by SAP."""
    env = Routing(batch_size, seed=SEED, topology=topology)
    recorder = EpisodeRecorder(Heuristic("sap", topology, seed=SEED), batch_size)
    run = tf.function(lambda: first_episodes(env, recorder, MAX_STEPS), jit_compile=True)
    run()  # Compiles.
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        _, lengths = run()
        rates.append((time.perf_counter() - start) / float(tf.reduce_sum(lengths)))
    return statistics.median(rates)


def slice_seconds(config, algo, pairs: int, repeats: int = 3) -> float:
    """One worker's time for a slice of `pairs` pairs, here on one thread (as a worker)."""
    size = 2 * pairs * config.es.episodes_per_member
    env = make_in_graph_env(config.env, size, SEED)
    evaluator = algo.make_evaluator(env, training=True)
    check_shared_streams(config, env)
    times = []
    for generation in range(repeats + 1):
        env.restart_streams(common_seed(SEED, generation), common_streams(pairs, size, 0))
        start = time.perf_counter()
        evaluator(algo.strategy.pair_members(0, pairs, generation))
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])  # The first compiles.


def measure(preset: str, workers: int, warmup: int, generations: int) -> dict:
    config, algo, _ = build_es(preset, [f"train.seed={SEED}"], SEED)
    rows = []
    with RayPopulation(config, algo, workers, cpus_per_actor=1.0, seed=SEED) as population:
        for generation in range(warmup + generations):
            start = time.perf_counter()
            steps, stats = population.step()
            wall = time.perf_counter() - start
            if generation < warmup:
                continue
            timing = population.timing
            slowest = int(np.argmax(timing["workers"]))
            rows.append(dict(wall=wall, steps=steps, slowest=slowest, **timing))
    return {"config": config, "rows": rows, "slices": population.slices}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=list(PRESETS))
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 2, 4])
    parser.add_argument("--estimate", nargs="+", type=int, default=[16, 32, 64])
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--generations", type=int, default=5)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    limit_threads(1)
    run = harness.Run("routing_workers")
    print(run.header, flush=True)
    connect(load_run_config(args.presets[0], []).ray, max(args.workers))
    results = {"presets": {}}
    try:
        for preset in args.presets:
            results["presets"][preset] = run_preset(preset, args)
    finally:
        ray.shutdown()
    if args.json:
        run.save(results, args.json)


def run_preset(preset: str, args) -> dict:
    topology = PRESETS[preset]
    table, fits = [], []
    for workers in args.workers:
        run = measure(preset, workers, args.warmup, args.generations)
        config, rows = run["config"], run["rows"]
        per_member = config.es.episodes_per_member
        sizes = {2 * (stop - start) * per_member for start, stop in run["slices"]}
        per_step = {size: env_seconds_per_step(topology, size) for size in sizes}
        parts = []
        for row in rows:
            start, stop = run["slices"][row["slowest"]]
            size = 2 * (stop - start) * per_member
            worker = max(row["workers"])
            steps = row["steps"] * (stop - start) / sum(b - a for a, b in run["slices"])
            env = min(worker, steps * per_step[size])
            parts.append(
                dict(
                    wall=row["wall"],
                    worker=worker,
                    env=env,
                    network=worker - env,
                    communication=row["wall"] - worker - row["update"],
                    update=row["update"],
                )
            )
        median = {key: statistics.median(part[key] for part in parts) for key in parts[0]}
        median["env_share"] = median["env"] / median["wall"]
        median["workers"] = workers
        median["cores_shared"] = workers > (os.cpu_count() or 1)
        table.append(median)
        fits.append((workers, median["communication"]))
        print(
            f"{preset} W={workers:3d}: generation {median['wall']:.3f}s = worker "
            f"{median['worker']:.3f} (env {median['env']:.3f}, network "
            f"{median['network']:.3f}) + communication {median['communication']:.3f} + update "
            f"{median['update']:.3f}; env share {median['env_share']:.0%}"
            + (" (workers share the cores)" if median["cores_shared"] else ""),
            flush=True,
        )
    # A cluster of one core per worker, from the measured parts.
    config, algo, _ = build_es(preset, [f"train.seed={SEED}"], SEED)
    counts, comms = zip(*fits)
    slope, intercept = np.polyfit(counts, comms, 1) if len(fits) > 1 else (0.0, comms[0])
    update = statistics.median(row["update"] for row in table)
    estimates = []
    for workers in args.estimate:
        pairs = max(1, algo.strategy.pairs // workers)
        worker = slice_seconds(config, algo, pairs)
        communication = max(0.0, intercept + slope * workers)
        total = worker + communication + update
        estimates.append(
            dict(
                workers=workers,
                pairs=pairs,
                worker=worker,
                communication=communication,
                update=update,
                wall=total,
            )
        )
        print(
            f"{preset} estimate W={workers}: {total:.3f}s = slice of {pairs} pairs "
            f"{worker:.3f} + communication {communication:.3f} (fit {intercept:.3f} + "
            f"{slope:.4f} W) + update {update:.3f}",
            flush=True,
        )
    return {"measured": table, "estimated": estimates}


if __name__ == "__main__":
    main()
