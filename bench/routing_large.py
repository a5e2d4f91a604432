"""A generated network of 100 nodes or more: its build, the heuristics, and ES generations.

Builds the topology (`load_topology`: the Waxman graph and every pair's K candidate
paths) and a batch of `Routing` networks on it, timing each; scores the heuristics on
the first episode of each of `--episodes` networks (as bench/routing_heuristics.py);
then runs `--generations` ES generations of `--config` moved onto the topology (a mixed
batch of one topology, env.id batchrl/Routing-v0), timing each (the first compiles).

    python bench/routing_large.py --topology waxman-100-s0 --episodes 300 --generations 3
"""

from __future__ import annotations

import argparse
import time

import harness
import numpy as np
from routing_es import build_es
from routing_heuristics import evaluate

from batchrl.envs.routing import HEURISTICS, Routing, load_topology


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topology", default="waxman-100-s0")
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--config", default="nsfnet_es")
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("overrides", nargs="*", help="config overrides key=value")
    args = parser.parse_args()
    print(f"load {harness.load()}", flush=True)
    start = time.perf_counter()
    topology = load_topology(args.topology)
    build = time.perf_counter() - start
    paths = sum(len(found) for found in topology.paths.values())
    print(
        f"{args.topology}: {topology.num_nodes} nodes, {topology.num_links} directed links, "
        f"{len(topology.message_pairs)} message pairs, {paths} candidate paths of at most "
        f"{topology.path_links.shape[-1]} hops; built in {build:.2f}s",
        flush=True,
    )
    start = time.perf_counter()
    Routing(args.episodes, seed=args.seed, topology=topology)
    print(f"Routing({args.episodes}) on it: {time.perf_counter() - start:.2f}s", flush=True)
    for heuristic in HEURISTICS:
        start = time.perf_counter()
        returns = evaluate(topology, heuristic, args.episodes, args.seed)
        error = returns.std(ddof=1) / np.sqrt(len(returns))
        print(
            f"{heuristic:15s} {returns.mean():7.2f} +- {error:4.2f} "
            f"({time.perf_counter() - start:5.1f}s, compile included)",
            flush=True,
        )
    if not args.generations:
        return
    overrides = [
        "env.id=batchrl/Routing-v0",
        f"env.topologies=[{args.topology}]",
        "network.topology=''",
        f"train.seed={args.seed}",
        *args.overrides,
    ]
    config, algo, trainer = build_es(args.config, overrides, args.seed)
    print(
        f"ES ({args.config}): {algo.network.num_params} parameters, "
        f"{2 * config.es.population} members, jit_compile {config.train.jit_compile}",
        flush=True,
    )
    for generation in range(args.generations):
        start = time.perf_counter()
        steps, stats = trainer.step()
        print(
            f"generation {generation}: {time.perf_counter() - start:6.1f}s, {steps} steps, "
            f"mean return {float(stats['mean_return']):.2f}, mean length "
            f"{float(stats['mean_length']):.1f}; load {harness.load()}",
            flush=True,
        )


if __name__ == "__main__":
    main()
