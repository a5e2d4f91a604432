"""A population run's members, grouped by their settings: steps to a return, and the final one.

    python bench/sweep_curves.py LOGDIR --threshold -200

Reads each member's evaluations (`LOGDIR/member-MM/eval`, the `eval/mean_return` that
`train.eval_every` writes) and its seed and settings (`LOGDIR/policies/member-MM/
batchrl.json`), and prints a table with a row per setting: over its seeds, how many
reached the threshold at some evaluation and the median step of the first that did (a
seed that never did counts as infinite), and how many ended at or above it and their
median and worst final evaluation. It tells a sweep (`--sweep`) that is judged both on
how fast members solve and on where they end.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path

import tensorflow as tf
from medians import cell, median_to_target


def member_curve(folder: Path) -> list[tuple[int, float]]:
    """(step, eval/mean_return) of a member's evaluations, in order."""
    points = []
    for path in sorted((folder / "eval").glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                if value.tag == "eval/mean_return":
                    points.append((int(event.step), float(tf.make_ndarray(value.tensor))))
    return sorted(points)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logdir")
    parser.add_argument("--threshold", type=float, default=-200.0)
    args = parser.parse_args(argv)
    logdir = Path(args.logdir)
    groups = defaultdict(list)
    for folder in sorted(logdir.glob("member-*")):
        meta = json.loads((logdir / "policies" / folder.name / "batchrl.json").read_text())
        skip = {"member", "seed", "train_return", "eval_return"}
        setting = tuple(sorted((k, v) for k, v in meta.items() if k not in skip))
        curve = member_curve(folder)
        first = next((step for step, value in curve if value >= args.threshold), None)
        groups[setting].append((meta["seed"], first, curve[-1][1] if curve else math.nan))
    print(
        f"| setting | seeds | reached {args.threshold:g} | median steps to it | ended at or "
        "above | median final | worst final |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for setting, runs in groups.items():
        name = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in setting)
        finals = [final for _, _, final in runs]
        steps = median_to_target(first for _, first, _ in runs)
        print(
            f"| {name or '(the config)'} | {len(runs)} | "
            f"{sum(first is not None for _, first, _ in runs)}/{len(runs)} | "
            f"{cell(steps, ',.0f')} | {sum(f >= args.threshold for f in finals)}/{len(runs)} | "
            f"{statistics.median(finals):.1f} | {min(finals):.1f} |"
        )


if __name__ == "__main__":
    main()
