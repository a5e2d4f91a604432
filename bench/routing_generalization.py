"""One router for a family of generated topologies: trained on some, scored on held-out ones.

Trains ES (`--config`, a mixed-batch preset) on a mixed batch of the `--train`
topologies for `--minutes` of training time (or `--generations`), then scores the final
theta on the first episode of each of `--episodes` networks of every `--train` and
`--test` topology, each in a batch of its own (the graph network's weights fit any
topology), beside SAP and load balancing on the same episodes. Prints a Markdown table
with the router's mean, its difference from SAP on the same episodes (paired, with its
standard error) and whether it is above SAP. The held-out topologies default to other
Waxman graphs and to NSFNET and GEANT2.

    python bench/routing_generalization.py --minutes 8

A run too long for one sitting trains with `routing_es.py`, which checkpoints, resumes
and evaluates on a fixed set as it goes (the same ES, seed for seed), and this script
scores a checkpoint of it (`--checkpoint`, the run's folder or its `best/`) instead of
training; given one per seed, it scores each on the same episodes, and the table counts
the seeds above SAP (k/n) on each topology:

    python bench/routing_es.py --config mixed_es --seed 0 --minutes 300 --eval-every 10 \
        --checkpoints DIR --out es_waxman_s0.json "env.topologies=[waxman-10-s0, ...]"
    python bench/routing_generalization.py --checkpoint DIR/best
    python bench/routing_generalization.py --checkpoint DIR0/best DIR1/best DIR2/best
"""

from __future__ import annotations

import argparse
import time

import harness
import numpy as np
import tensorflow as tf
from routing_es import build_es, fixed_set_evaluator, mean_text
from routing_heuristics import evaluate as heuristic_returns

from batchrl.envs.routing import RoutingGraphFeatures, load_topology
from batchrl.networks.graph import GraphPopulation
from batchrl.training.checkpoints import Checkpoints

TRAIN = [f"waxman-{n}-s{seed}" for n in (10, 20, 30, 40, 50) for seed in (0, 1)]
TEST = [f"waxman-{n}-s100" for n in (15, 25, 35, 45)] + ["nsfnet", "geant2"]


def router_evaluator(network, topology, episodes: int, seed: int, jit_compile=True):
    """A function theta -> returns [episodes] of its first episodes on `topology` alone
    (a fixed set), for thetas of `network`'s shape (its weights fit any topology); XLA
    with `jit_compile`."""
    population = GraphPopulation(
        RoutingGraphFeatures(topology),
        network.core.size,
        network.core.readout,
        network.core.steps,
        path_readout=network.core.path_readout,
    )
    return fixed_set_evaluator(population, topology, episodes, seed, 16, jit_compile)


def versus_sap(routers: list[np.ndarray], sap: np.ndarray) -> tuple[str, str, str]:
    """The 'router', 'router - SAP' and 'above SAP' cells of a row of the table.

    `routers` holds each checkpoint's returns [E] on the episodes of `sap` [E] (the same
    networks and demand streams), so each difference is paired, episode by episode, with
    the standard error of its E differences. A checkpoint is above SAP when its mean is.
    With one checkpoint the router cell is its mean +- standard error; with more, the
    mean of their means and, in brackets, the lowest and highest.
    """
    means = [float(returns.mean()) for returns in routers]
    if len(routers) == 1:
        router = mean_text(routers[0])
    else:
        router = f"{np.mean(means):.2f} ({min(means):.2f} to {max(means):.2f})"
    differences = [returns - sap for returns in routers]
    each = ", ".join(
        f"{d.mean():+.2f} +- {d.std(ddof=1) / np.sqrt(len(d)):.2f}" for d in differences
    )
    above = sum(mean > float(sap.mean()) for mean in means)
    return router, each, f"{above}/{len(routers)}"


def restore(algo, folder: str) -> int:
    """Restores ES `algo` from the newest checkpoint in `folder` (one that
    `routing_es.py --checkpoints` wrote, or its `best/`); returns its generation."""
    prefix = Checkpoints(tf.train.Checkpoint(algo=algo), folder).restore(print)
    if prefix is None:
        raise SystemExit(
            f"--checkpoint {folder}: no checkpoint there (ckpt-N files); give the folder "
            "that routing_es.py --checkpoints wrote, or its best/."
        )
    return int(prefix.rpartition("-")[2])


def train(trainer, generations: int, minutes: float) -> tuple[int, float]:
    """Runs `trainer` for `generations` or `minutes` of training time, whichever ends
    first, printing each generation's mean return; returns (generations, seconds)."""
    train_time, generation = 0.0, 0
    while generation < generations and train_time < 60 * minutes:
        start = time.perf_counter()
        _, stats = trainer.step()
        train_time += time.perf_counter() - start
        generation += 1
        print(
            f"generation {generation:3d} train {train_time:6.1f}s "
            f"mean return {float(stats['mean_return']):6.2f}",
            flush=True,
        )
    return generation, train_time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="mixed_es")
    parser.add_argument("--train", nargs="+", default=TRAIN)
    parser.add_argument("--test", nargs="+", default=TEST)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--minutes", type=float, default=8.0)
    parser.add_argument("--generations", type=int, default=10**6)
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--eval-seed", type=int, default=777)
    parser.add_argument("--set", action="append", default=[], help="a config override")
    parser.add_argument(
        "--checkpoint",
        nargs="+",
        default=[],
        help="score the theta of each of these routing_es.py --checkpoints folders (or "
        "their best/; one per seed) instead of training; --config, --train and --set "
        "must be the runs'",
    )
    args = parser.parse_args()
    topologies = "[" + ", ".join(args.train) + "]"
    overrides = [f"env.topologies={topologies}", f"train.seed={args.seed}", *args.set]
    config, algo, trainer = build_es(args.config, overrides, args.seed)
    print(
        f"{args.config} on {len(args.train)} topologies, seed {args.seed}: "
        f"{algo.network.num_params} parameters; load {harness.load()}",
        flush=True,
    )
    thetas, trained = [], []
    for folder in args.checkpoint:
        trained.append(f"{folder}, generation {restore(algo, folder)}")
        thetas.append(tf.identity(algo.strategy.theta))
    if not args.checkpoint:
        generation, train_time = train(trainer, args.generations, args.minutes)
        trained.append(f"{generation} generations, {train_time:.0f}s")
        thetas.append(tf.identity(algo.strategy.theta))
    print(f"\n{'; '.join(trained)}; {args.episodes} fixed episodes each\n")
    print(
        "| topology | nodes | links | set | router | router - SAP, each | above SAP | SAP "
        "| load balancing |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for names, kind in ((args.train, "train"), (args.test, "held out")):
        for name in names:
            topology = load_topology(name)
            fixed_set = (args.episodes, args.eval_seed, config.train.jit_compile)
            evaluate = router_evaluator(algo.network, topology, *fixed_set)
            routers = [evaluate(theta) for theta in thetas]
            sap = heuristic_returns(topology, "sap", *fixed_set)
            balance = heuristic_returns(topology, "load_balancing", *fixed_set)
            cells = " | ".join(versus_sap(routers, sap))
            print(
                f"| {name} | {topology.num_nodes} | {topology.num_links} | {kind} | {cells} | "
                f"{mean_text(sap)} | {mean_text(balance)} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
