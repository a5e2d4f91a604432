"""Scaling on Ray with environments that sleep 2 ms per step: IMPALA actors and ES workers.

    python bench/ray_scaling.py                      # everything below, about 15 minutes
    python bench/ray_scaling.py --part impala --actors 1 2 --seconds 10   # a smoke test

Two cores cannot show scaling with environments that need the CPU, so every environment
step here sleeps 2 ms (`bench/ray_envs.py`, episodes of exactly 50 steps) and the
environments of an actor or worker are stepped one after another in its process
(`env.processes=false`): one batched step of B environments takes B x 2 ms.

- `impala`: environment steps per second of IMPALA learning (`RayActorLearner.update`,
  `debug_impala` with B=8 environments per actor, T=20, 2 unrolls per update) with 1, 2,
  4 and 8 Ray actors (`ray.cpus_per_actor=0.25`, actor inference), and the threads
  runner's `ActorLearner` with the same numbers of actor threads, in this invocation.
  Each runs `--warmup` updates (actor start-up, TensorFlow import and tracing) and is then
  timed for `--seconds`. Efficiency is steps/s at n actors over n x steps/s at 1.
- `central`: the same at 8 Ray actors with `ray.inference=central` beside actor inference,
  and `ray.inference=dynamic` twice: `ray-inline`, the batcher running only while the
  learner waits for unrolls (`RayActorLearner(background=False)`, as before 2026-11-26),
  and `ray-dynamic`, the batcher in a thread of its own, so that actors step while the
  learner learns (the default).
- `learner`: steps per second the learner alone consumes (`learn` on 2, 8 or 32 unrolls
  of one actor's, weights put into the object store), the bound of IMPALA's scaling.
- `es`: ES generations per second (`RayPopulation.step`, 16 members, one 50-step episode
  each) with 1, 2, 4 and 8 workers, after `--warmup` generations.

Ray is started on this machine for the run (`ray.init(address="local")`).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Ray's workers import bench.ray_envs (the environment) from the repository.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
sys.path.insert(0, str(REPO))

from bench import harness  # noqa: E402

ENV = "bench.ray_envs:batchrl-bench/Sleepy-v0"


def impala_config(actors: int, inference: str = "actor"):
    from batchrl.config import load_run_config

    return load_run_config(
        "debug_impala",
        [
            f"env.id={ENV}",
            "env.num_envs=8",
            "env.processes=false",
            "impala.unroll_length=20",
            "runner.name=ray",
            f"ray.num_actors={actors}",
            "ray.cpus_per_actor=0.25",
            f"ray.inference={inference}",
        ],
    )


def timed(update, warmup: int, seconds: float) -> float:
    for _ in range(warmup):
        update()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        steps += update()[0]
    return steps / (time.perf_counter() - start)


def impala_rate(mode: str, actors: int, warmup: int, seconds: float) -> float:
    from batchrl.algorithms import IMPALA
    from batchrl.runners.ray import RayActorLearner, make_behaviour_policy
    from batchrl.runners.threads import ActorLearner
    from batchrl.tools.environments import EnvSpaces, make_batch_env

    inference = {"ray-central": "central", "ray-dynamic": "dynamic", "ray-inline": "dynamic"}
    config = impala_config(actors, inference.get(mode, "actor"))
    algo = IMPALA(EnvSpaces(config.env, config.env.num_envs), config)
    make_env = functools.partial(make_batch_env, config.env, config.env.num_envs)
    if mode == "threads":
        runner = ActorLearner(make_env, algo, actors, 20, learner_batch=2, unroll_timeout=600)
        runner.start()
    else:
        runner = RayActorLearner(
            make_env,
            functools.partial(make_behaviour_policy, config),
            algo,
            actors,
            20,
            inference=config.ray.inference,
            cpus_per_actor=0.25,
            timeout=600,
            background=mode != "ray-inline",
        )
    try:
        return timed(runner.update, warmup, seconds)
    finally:
        runner.close()


def learner_rate(batch: int, seconds: float) -> float:
    """Steps/s the learner alone consumes: `learn` on `batch` unrolls of T=20 x B=8, and
    the weights put into the object store, as `RayActorLearner.update` does."""
    import ray
    import tensorflow as tf

    from batchrl.algorithms import IMPALA
    from batchrl.runners.unrolls import Unroll, UnrollCollector, concatenate
    from batchrl.tools.environments import EnvSpaces, make_batch_env

    config = impala_config(1)
    algo = IMPALA(EnvSpaces(config.env, 8), config)
    policy = algo.make_behaviour_policy(0)
    collector = UnrollCollector(make_batch_env(config.env, 8), 0)
    arrays, _, _ = collector.unroll(policy, 20)
    collector.close()
    unrolls = [Unroll(arrays, 0, 0)] * batch
    learn = tf.function(algo.learn)

    def update():
        learn(concatenate(unrolls))
        ray.put([variable.numpy() for variable in algo.behaviour_variables()])
        return 20 * 8 * batch, None

    return timed(update, 3, seconds)


def es_rate(workers: int, warmup: int, seconds: float) -> float:
    from batchrl.algorithms.es import ES
    from batchrl.config import load_run_config
    from batchrl.runners.ray import RayPopulation
    from batchrl.tools.environments import make_in_graph_env

    config = load_run_config(
        "cartpole_es",
        [
            f"env.id={ENV}",
            "env.backend=gymnasium",
            "env.eval_on_gymnasium=false",
            "env.processes=false",
            "train.jit_compile=false",
            "es.population=8",
            "es.max_episode_steps=50",
            "runner.name=ray",
            f"ray.num_actors={workers}",
        ],
    )
    algo = ES(make_in_graph_env(config.env, 1, 0), config, seed=0)
    with RayPopulation(config, algo, workers, cpus_per_actor=0.25, timeout=600) as population:
        for _ in range(warmup):
            population.step()
        generations, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            population.step()
            generations += 1
        return generations / (time.perf_counter() - start)


def load() -> str:
    return f"load average {harness.load()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--part", choices=("impala", "central", "es", "learner", "all"), default="all"
    )
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()

    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    print(f"start: {load()}", flush=True)
    try:
        if args.part in ("impala", "all"):
            for mode in ("threads", "ray"):
                base = None
                for actors in args.actors:
                    rate = impala_rate(mode, actors, args.warmup, args.seconds)
                    base = base or rate / actors
                    print(
                        f"impala {mode:7s} {actors} actors: {rate:8.0f} steps/s, efficiency "
                        f"{rate / (actors * base):.2f} | {load()}",
                        flush=True,
                    )
        if args.part in ("central", "all"):
            actors = max(args.actors)
            for mode in ("ray", "ray-central", "ray-inline", "ray-dynamic"):
                rate = impala_rate(mode, actors, args.warmup, args.seconds)
                print(f"impala {mode} {actors} actors: {rate:8.0f} steps/s | {load()}", flush=True)
        if args.part in ("es", "all"):
            base = None
            for workers in args.actors:
                rate = es_rate(workers, args.warmup, args.seconds)
                base = base or rate / workers
                print(
                    f"es {workers} workers: {rate:6.2f} generations/s, efficiency "
                    f"{rate / (workers * base):.2f} | {load()}",
                    flush=True,
                )
        if args.part in ("learner", "all"):
            for batch in (2, 8, 32):
                rate = learner_rate(batch, args.seconds)
                print(f"learner alone, {batch} unrolls per update: {rate:8.0f} steps/s | {load()}")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
