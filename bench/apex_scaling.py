"""Ape-X on Ray with environments that sleep 2 ms per step: throughput for 1 to 8 actors.

    python bench/apex_scaling.py                                  # 1, 2, 4, 8 actors, 2 shards
    python bench/apex_scaling.py --actors 1 2 --seconds 5 --warmup 20   # a smoke test

First, as the baseline, single-process DQN on the same environments (`--no-dqn` skips it):
8 of them stepped in the trainer's process, one learner update per batched step.

The environments are `bench/ray_scaling.py`'s (`bench/ray_envs.py`: every step sleeps
2 ms, episodes of exactly 50 steps), B=8 per actor stepped one after another in the
actor's process (`env.processes=false`), so a batched step takes 16 ms and an actor
collects at most 500 environment steps per second. Ape-X is `cartpole_apex_ray`'s on that
environment: `--shards` replay shards (`apex.cpus_per_shard` 0.25), actors of 0.25 CPUs,
blocks of 20 batched steps, actors running free (`apex.steps_per_update=0`), learning from
256 transitions on. For each number of actors it runs `RayApex.step` until the learner
has made `--warmup` updates (start-up, tracing, the shards' first fill), then for
`--seconds`, and prints the transitions the shards took per second and the learner's
updates per second, each also as a fraction of linear (its rate at n actors over n times
its rate at 1).

Ray is started on this machine for the run (`ray.init(address="local")`).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import harness  # noqa: E402
from bench.ray_scaling import ENV, load  # noqa: E402  # Also sets PYTHONPATH for Ray's workers.


def apex_config(actors: int, shards: int):
    from batchrl.config import load_run_config

    return load_run_config(
        "cartpole_apex_ray",
        [
            f"env.id={ENV}",
            "env.num_envs=8",
            "env.processes=false",
            f"ray.num_actors={actors}",
            "ray.cpus_per_actor=0.25",
            f"apex.num_shards={shards}",
            "apex.cpus_per_shard=0.25",
            "apex.block_length=20",
            "apex.steps_per_update=0",
            "dqn.learning_starts=256",
        ],
    )


def apex_rates(actors: int, shards: int, warmup: int, seconds: float) -> tuple[float, float]:
    """Transitions into the shards per second, and learner updates per second."""
    from batchrl.algorithms import DQN
    from batchrl.runners.ray import RayApex
    from batchrl.tools.environments import EnvSpaces

    config = apex_config(actors, shards)
    learner = DQN(EnvSpaces(config.env, config.env.num_envs), config, seed=0)
    with RayApex(config, learner, actors, cpus_per_actor=0.25, timeout=600) as runner:
        while runner.version < warmup:
            runner.step()
        added, version, start = runner.added, runner.version, time.perf_counter()
        while time.perf_counter() - start < seconds:
            runner.step()
        elapsed = time.perf_counter() - start
        return (runner.added - added) / elapsed, (runner.version - version) / elapsed


def dqn_rates(warmup: int, seconds: float) -> tuple[float, float]:
    """Single-process DQN on the same 8 sleeping environments (runner local).

    `cartpole_apex_ray`'s DQN settings (n-step 3, prioritized replay, double Q), acting and
    learning in turn in one graph call: a batched step of the 8 environments, then one
    update (`dqn.train_freq=1`, `dqn.gradient_steps=1`), as an actor and the learner would
    if they shared a process.
    """
    import tensorflow as tf

    from batchrl.config import load_run_config
    from batchrl.runners.local import LocalTrainer
    from batchrl.runners.train import make_algorithm

    config = load_run_config(
        "cartpole_dqn",
        [
            f"env.id={ENV}",
            "env.num_envs=8",
            "env.processes=false",
            "dqn.n_step=3",
            "dqn.prioritized=true",
            "dqn.learning_starts=256",
            "dqn.train_freq=1",
            "dqn.gradient_steps=1",
            "train.steps_per_call=20",
        ],
    )
    step = tf.Variable(0, dtype=tf.int64, trainable=False)
    batch_env = LocalTrainer.make_batch_env(config, seed=0)
    algo = make_algorithm(config, batch_env, step)
    trainer = LocalTrainer(config, algo, batch_env)

    def run(until):
        steps = 0
        while not until():
            per_call, _ = trainer.step()
            step.assign_add(per_call)
            steps += per_call
        return steps

    run(lambda: int(algo.optimizer.iterations) >= warmup)
    updates, start = int(algo.optimizer.iterations), time.perf_counter()
    steps = run(lambda: time.perf_counter() - start >= seconds)
    elapsed = time.perf_counter() - start
    batch_env.close()
    return steps / elapsed, (int(algo.optimizer.iterations) - updates) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=int, default=50, help="learner updates")
    parser.add_argument(
        "--no-dqn", dest="dqn", action="store_false", help="skip single-process DQN"
    )
    parser.add_argument("--json", help="also write the rates to this file")
    args = parser.parse_args()
    run = harness.Run("apex")

    import ray

    # Ray's CPUs are labels for scheduling: 8 actors and 2 shards of 0.25 need 2.5 of them,
    # more than this machine's 2 cores, which they share while their environments sleep.
    cpus = max(2, math.ceil(0.25 * (max(args.actors) + args.shards)))
    ray.init(address="local", num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    print(f"start: {load()}, {cpus} Ray CPUs on {os.cpu_count()} cores", flush=True)
    result = {"seconds": args.seconds, "shards": args.shards, "dqn": None, "apex": []}
    try:
        if args.dqn:
            added, updates = dqn_rates(args.warmup, args.seconds)
            result["dqn"] = {"transitions": added, "updates": updates}
            print(
                f"single-process DQN, 8 environments: {added:8.0f} transitions/s, "
                f"{updates:7.1f} updates/s | {load()}",
                flush=True,
            )
        base = None
        for actors in args.actors:
            added, updates = apex_rates(actors, args.shards, args.warmup, args.seconds)
            base = base or (added / actors, updates / actors)
            result["apex"].append({"actors": actors, "transitions": added, "updates": updates})
            print(
                f"apex {actors} actors, {args.shards} shards: {added:8.0f} transitions/s "
                f"({added / (actors * base[0]):.2f} of linear), {updates:7.1f} updates/s "
                f"({updates / (actors * base[1]):.2f} of linear) | {load()}",
                flush=True,
            )
    finally:
        ray.shutdown()
    if args.json:
        run.save(result, args.json)


if __name__ == "__main__":
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    main()
