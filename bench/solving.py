"""Wall-clock and environment steps of a training run to its first evaluation >= a target.

Shared by the bench scripts that race presets to a return (`impala.py`, `es_cartpole.py`):

    record = solve("PPO", "cartpole", ["train.total_steps=500000"], seed=0, target=475.0)
    print(markdown([record, ...]))

`solve` runs `batchrl.runners.train` and stops it at its first evaluation at or above
`target`. The clock runs from the call of `train()`: environment and model construction,
graph tracing, evaluations, checkpoints and summaries are all inside it.
"""

from __future__ import annotations

import re
import sys
import tempfile
import time

from medians import cell, median_to_target

from batchrl.config import load_run_config
from batchrl.runners import train


class Solved(Exception):
    """Raised from the progress hook to stop a run at its first evaluation >= target."""


def solve(method: str, preset: str, overrides: list[str], seed: int, target: float) -> dict:
    """Trains `preset` with `overrides` until an evaluation reaches `target`.

    Evaluations are 16 deterministic episodes; `overrides` sets how often
    (`train.eval_every`) and the budget (`train.total_steps`).

    Returns:
      `method`, `seed`, `steps` and `seconds` at the first evaluation >= target (None if
      never), `evals` [(steps, return)], and `total_seconds`.
    """
    overrides = [
        *overrides,
        f"train.seed={seed}",
        "train.eval_episodes=16",
        "train.checkpoint_every=1000000000",
    ]
    config = load_run_config(preset, overrides)
    record = {"method": method, "seed": seed, "steps": None, "seconds": None, "evals": []}
    record["budget"] = int(config.train.total_steps)

    def progress(text, final=False):
        match = re.search(r"step ([\d,]+)/.*eval (-?[\d.]+|nan)", text)
        if not match or match.group(2) == "nan":
            return
        steps, value = int(match.group(1).replace(",", "")), float(match.group(2))
        if not record["evals"] or record["evals"][-1][0] != steps:
            record["evals"].append((steps, value))
        if value >= target:
            record["steps"], record["seconds"] = steps, time.time() - start
            raise Solved

    start = time.time()
    with tempfile.TemporaryDirectory() as logdir:
        try:
            train(config, logdir, progress=progress)
        except Solved:
            pass
    record["total_seconds"] = time.time() - start
    print(_line(record), file=sys.stderr, flush=True)
    return record


def _line(record: dict) -> str:
    if record["steps"] is None:
        return f"{record['method']} seed {record['seed']}: not solved in {record['budget']:,} steps"
    return (
        f"{record['method']} seed {record['seed']}: {record['steps']:,} steps, "
        f"{record['seconds']:.1f} s"
    )


def markdown(records: list[dict]) -> str:
    """A table per run and a table of medians per method (unsolved runs count as infinite)."""
    lines = ["| method | seed | steps | seconds |", "|---|---:|---:|---:|"]
    for r in records:
        steps = f"{r['steps']:,}" if r["steps"] else f"not in {r['budget']:,}"
        seconds = f"{r['seconds']:.1f}" if r["seconds"] else "—"
        lines.append(f"| {r['method']} | {r['seed']} | {steps} | {seconds} |")
    lines += ["", "| method | solved | median steps | median seconds |", "|---|---:|---:|---:|"]
    for method in dict.fromkeys(r["method"] for r in records):
        runs = [r for r in records if r["method"] == method]
        solved = sum(r["steps"] is not None for r in runs)
        steps = median_to_target(r["steps"] for r in runs)
        seconds = median_to_target(r["seconds"] for r in runs)
        cells = f"{cell(steps, ',.0f')} | {cell(seconds, '.1f')}"
        lines.append(f"| {method} | {solved}/{len(runs)} | {cells} |")
    return "\n".join(lines)
