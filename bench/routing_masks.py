"""Steps per second of the routing twin with its paths' masks from the table, and from links.

    python bench/routing_masks.py
    python bench/routing_masks.py --topologies nsfnet --batch-sizes 16 --seconds 0.05 --repeats 1

`Routing` looks each candidate path's 0/1 link mask up in a table [T, N, N, K, L] while
the table holds at most `MASK_TABLE_LIMIT` numbers, and otherwise builds it each step
from the path's links (the sum of their one-hots). Both give the same numbers (the
parity test in tests/envs/routing/test_routing.py runs both ways); this measures what the
table is worth. Each side is `Routing` of B networks driven by `simulate` with a
heuristic, `--steps-per-call` steps per `tf.function(jit_compile=True)` call (the `Twin`
of bench/routing_twin.py); `links` is the same environment built with the limit set
to 0. Measurements of `--seconds` after the compile, `--repeats` times interleaved; the
table shows medians and the ratio table / links.
"""

from __future__ import annotations

import argparse
import statistics

import harness
import tensorflow as tf
from routing_twin import Twin


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--topologies", nargs="+", default=["nsfnet", "geant2"])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[16, 256, 4096])
    parser.add_argument("--policies", nargs="+", default=["random", "sap"])
    parser.add_argument("--steps-per-call", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=2.0, help="per measurement")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    keys = [
        (topology, policy, size)
        for topology in args.topologies
        for policy in args.policies
        for size in args.batch_sizes
    ]
    twins = {
        ((topology, policy, size), table): Twin(topology, size, policy, args.steps_per_call, table)
        for topology, policy, size in keys
        for table in (True, False)
    }
    rates = {name: [] for name in twins}
    load = [harness.load()]
    for _ in range(args.repeats):
        for name, twin in twins.items():
            run = twin.measure(args.seconds)
            rates[name].append(run["steps"] / run["seconds"])
        load.append(harness.load())
    print("| topology | policy | B | table, steps/s | links, steps/s | table / links |")
    print("|---|---|---:|---:|---:|---:|")
    for key in keys:
        table, links = (statistics.median(rates[key, side]) for side in (True, False))
        topology, policy, size = key
        ratio = table / links
        print(f"| {topology} | {policy} | {size} | {table:,.0f} | {links:,.0f} | {ratio:.2f}x |")
    print(f"load average {' -> '.join(f'{x:.2f}' for x in load)}; tensorflow {tf.__version__}")


if __name__ == "__main__":
    main()
