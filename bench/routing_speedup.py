"""The routing paper's experiment V-B from the logs of routing_ppo.py and routing_es.py.

The paper (Section V-B): "we measure the reward at which PPO converges. This is done by
running PPO with a redundant number of iterations, and then take the average reward during
the last 50 evaluations. Then, we compare how long does it take for the ES to reach PPO's
performance in convergence." Here, for each topology and seed:

- PPO's converged reward R is the mean of its run's last 50 fixed-set evaluations (a run
  with fewer is refused); the means of their first 25 and last 25 are printed beside it,
  so a run still rising shows;
- PPO's time is the training time of its first evaluation at R or above; ES's time is the
  training time of the first evaluation of the ES run of the same seed at R or above (a run
  that never gets there is a failure, shown as k/n);
- the speed-up is PPO's time over ES's.

Both logs are the `--out` JSON files of `routing_ppo.py` and `routing_es.py`, which score
the same fixed episodes and count training time alone (evaluations apart):

    python bench/routing_speedup.py --ppo ppo_nsfnet_s*.json --es es_nsfnet_s*.json
"""

from __future__ import annotations

import argparse
import json

import numpy as np

LAST = 50  # The paper's number of evaluations that define PPO's converged reward.


def load(paths: list[str]) -> dict[int, dict]:
    """The logs by seed; two logs of one seed are refused."""
    logs = {}
    for path in paths:
        with open(path) as file:
            data = json.load(file)
        if data["seed"] in logs:
            raise SystemExit(f"{path}: a second log of seed {data['seed']}")
        data["path"] = path
        logs[data["seed"]] = data
    return logs


def first_time_at(evals: list, level: float) -> float | None:
    """The training time of the first evaluation of mean `level` or more, or None."""
    return next((row[2] for row in evals if row[3] >= level), None)


def compare(ppo: dict, es: dict | None) -> dict:
    """One seed's converged reward, PPO's and ES's times to it, and the speed-up."""
    evals = ppo["evals"]
    if len(evals) < LAST:
        raise SystemExit(
            f"{ppo['path']}: {len(evals)} evaluations; the converged reward needs {LAST}"
        )
    means = np.array([row[3] for row in evals])
    level = float(means[-LAST:].mean())
    row = {
        "seed": ppo["seed"],
        "ppo": ppo["config"],
        "converged": level,
        "halves": [float(means[-LAST : -LAST // 2].mean()), float(means[-LAST // 2 :].mean())],
        "window": [evals[-LAST][2], evals[-1][2]],  # Training seconds; the run's end last.
        "ppo_time": first_time_at(evals, level),
        "es": es and es["config"],
        "es_time": es and first_time_at(es["evals"], level),
        "es_train": es and es["evals"][-1][2],
    }
    row["speedup"] = row["es_time"] and row["ppo_time"] / row["es_time"]
    return row


def table(rows: list[dict]) -> str:
    lines = [
        "| PPO, ES | seed | PPO trained | converged (last 50) | their halves | PPO reached it "
        "| ES reached it | speed-up |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        if row["es"] is None:
            es = "no ES log"
        elif row["es_time"] is None:
            es = f"not in {row['es_train']:,.0f} s"
        else:
            es = f"{row['es_time']:,.0f} s"
        speedup = f"{row['speedup']:.1f}x" if row["speedup"] else "-"
        lines.append(
            f"| {row['ppo']}, {row['es']} | {row['seed']} | {row['window'][1]:,.0f} s "
            f"| {row['converged']:.2f} ({row['window'][0]:,.0f} to {row['window'][1]:,.0f} s) "
            f"| {row['halves'][0]:.2f}, {row['halves'][1]:.2f} | {row['ppo_time']:,.0f} s "
            f"| {es} | {speedup} |"
        )
    done = [row["speedup"] for row in rows if row["speedup"]]
    lines.append("")
    lines.append(
        f"ES reached PPO's converged reward on {len(done)}/{len(rows)} seeds"
        + (f"; speed-ups {', '.join(f'{s:.1f}x' for s in done)}." if done else ".")
    )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ppo", nargs="+", required=True, help="routing_ppo.py logs")
    parser.add_argument("--es", nargs="*", default=[], help="routing_es.py logs")
    parser.add_argument("--json", default="", help="also write the rows here")
    args = parser.parse_args()
    ppo, es = load(args.ppo), load(args.es)
    rows = [compare(ppo[seed], es.get(seed)) for seed in sorted(ppo)]
    print(table(rows))
    if args.json:
        with open(args.json, "w") as file:
            json.dump(rows, file, indent=1)


if __name__ == "__main__":
    main()
