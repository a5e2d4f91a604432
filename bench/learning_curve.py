"""A training run's learning curve from its event files: returns per window of steps.

    python bench/learning_curve.py runs/pong_impala-20261126-193500 --window 500000

Reads the train script's summaries in LOGDIR: `train/` holds, per update, the mean
return of the episodes that ended in it (`simulate/mean_return`) and their count
(`simulate/episodes`); `eval/` holds each evaluation's `eval/mean_return`. Prints, per
window of `--window` environment steps, the mean training return over the episodes that
ended in it (each episode weighing the same, not each update), then every evaluation.
With `env.episodic_life` (the Atari presets) a training episode is one life; evaluations
play whole games. `--json` writes the same numbers.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def scalars(folder: Path, tags: set[str]) -> dict[str, list[tuple[int, float]]]:
    """Each tag's (step, value) pairs from the event files in `folder`, by step."""
    import tensorflow as tf

    found = {tag: [] for tag in tags}
    for path in sorted(folder.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                if value.tag in found:
                    found[value.tag].append((event.step, float(tf.make_ndarray(value.tensor))))
    return {tag: sorted(points) for tag, points in found.items()}


def windows(returns, episodes, window: int) -> list[dict]:
    """Episode-weighted mean returns per window of steps [k * window, (k + 1) * window)."""
    counts = dict(episodes)
    rows = {}
    for step, value in returns:
        count = counts.get(step, 0.0)
        if count > 0:
            row = rows.setdefault(step // window, [0.0, 0.0, step])
            row[0] += value * count
            row[1] += count
            row[2] = max(row[2], step)
    return [
        {"from": k * window, "to": last, "episodes": int(n), "mean_return": total / n}
        for k, (total, n, last) in sorted(rows.items())
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logdir", type=Path)
    parser.add_argument("--window", type=int, default=500_000, help="environment steps")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args()
    train = scalars(args.logdir / "train", {"simulate/mean_return", "simulate/episodes"})
    if not train["simulate/mean_return"]:
        parser.error(f"{args.logdir / 'train'}: no simulate/mean_return summaries there.")
    rows = windows(train["simulate/mean_return"], train["simulate/episodes"], args.window)
    evals = scalars(args.logdir / "eval", {"eval/mean_return"})["eval/mean_return"]
    print("| environment steps | episodes | mean training return |\n|---|---:|---:|")
    for row in rows:
        print(
            f"| {row['from']:,} to {row['to']:,} | {row['episodes']} | {row['mean_return']:.2f} |"
        )
    print("\n| evaluation at step | mean return |\n|---:|---:|")
    for step, value in evals:
        print(f"| {step:,} | {value:.2f} |")
    if args.json:
        result = {"windows": rows, "evaluations": [list(point) for point in evals]}
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
