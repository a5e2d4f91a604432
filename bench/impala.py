"""IMPALA on CartPole-v1: wall-clock to 475 beside PPO, and actor-learner throughput.

    python bench/impala.py                       # both parts, seeds 0 1 2
    python bench/impala.py --part solve --seeds 0
    python bench/impala.py --part throughput --steps 60000
    python bench/impala.py --part throughput --steps 2048 --actors 1 --num-envs 4   # smoke

Part `solve`: for each seed, one method after another (so that a slow moment of this
shared machine hits every method alike), `batchrl.runners.train` runs
- `cartpole_impala` (synchronous IMPALA inside `simulate`, runner `local`),
- `cartpole_impala` with `runner.name=threads` and `threads.num_actors=2` (asynchronous:
  two actor threads of 16 environments each, in the trainer's process, one unroll per
  learner step),
- `cartpole` (batchrl's PPO),
each for at most 500k environment steps, evaluating the deterministic policy on 16
Gymnasium episodes every 10,240 steps. A run stops at its first evaluation >= 475. The
clock runs from the call of `train()`: environment and model construction, graph
tracing and the evaluations themselves are included, checkpoints and summaries too.

Part `throughput`: environment steps per second of training (updates included, no
evaluation) on CartPole-v1 for `--steps` steps: the synchronous mode beside the
asynchronous one (runner `threads`) with 1, 2 and 4 actors, with environments in each
actor's thread and in `ExternalProcess` workers (one per environment), all in one
invocation. Every mode steps `--num-envs` environments (default 32), split over the
actors.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import solving

from batchrl.config import load_run_config
from batchrl.runners import train

TARGET = 475.0
BUDGET = 500_000
SOLVE_METHODS = {
    "IMPALA sync": ("cartpole_impala", []),
    "IMPALA async, 2 actors": (
        "cartpole_impala",
        [
            "runner.name=threads",
            "threads.num_actors=2",
            "env.num_envs=16",
            "threads.learner_batch=1",
        ],
    ),
    "PPO": ("cartpole", []),
}


def solve(method: str, seed: int) -> dict:
    preset, overrides = SOLVE_METHODS[method]
    overrides = overrides + [f"train.total_steps={BUDGET}", "train.eval_every=10240"]
    return solving.solve(method, preset, overrides, seed, TARGET)


def throughput(name: str, overrides: list[str], steps: int) -> dict:
    overrides = overrides + [f"train.total_steps={steps}", "train.eval_every=0"]
    config = load_run_config("cartpole_impala", overrides)
    start = time.time()
    with tempfile.TemporaryDirectory() as logdir:
        result = train(config, logdir, progress=lambda *_, **__: None)
    seconds = time.time() - start
    record = {"mode": name, "steps": result["step"], "seconds": seconds}
    record["rate"] = result["step"] / seconds
    print(f"{name}: {record['rate']:,.0f} steps/s", file=sys.stderr, flush=True)
    return record


def throughput_modes(actors: list[int], num_envs: int) -> list[tuple[str, list[str]]]:
    modes = [(f"sync, {num_envs} envs in-process", [f"env.num_envs={num_envs}"])]
    for count in actors:
        per_actor = num_envs // count
        common = ["runner.name=threads", f"threads.num_actors={count}"]
        common.append(f"env.num_envs={per_actor}")
        modes.append((f"async, {count} x {per_actor} envs in-thread", common))
        modes.append(
            (f"async, {count} x {per_actor} envs in workers", common + ["env.processes=true"])
        )
    return modes


def markdown(solved: list[dict], rates: list[dict]) -> str:
    lines = []
    if solved:
        lines += [
            f"CartPole-v1, first evaluation >= {TARGET:.0f} (16 deterministic episodes every "
            "10,240 steps), wall-clock of `train()` including tracing and evaluations.",
            "",
            solving.markdown(solved),
        ]
    if rates:
        base = rates[0]["rate"]
        lines += [
            "",
            "| mode | steps | seconds | steps/s | ÷ sync |",
            "|---|---:|---:|---:|---:|",
        ]
        for r in rates:
            lines.append(
                f"| {r['mode']} | {r['steps']:,} | {r['seconds']:.1f} | {r['rate']:,.0f} "
                f"| {r['rate'] / base:.2f} |"
            )
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=["solve", "throughput", "both"], default="both")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=61440, help="throughput steps per mode")
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--num-envs", type=int, default=32, help="throughput: split over actors")
    parser.add_argument("--out", type=Path, default=None, help="also write the tables here")
    args = parser.parse_args(argv)
    solved, rates = [], []
    if args.part in ("solve", "both"):
        for seed in args.seeds:
            for method in SOLVE_METHODS:
                solved.append(solve(method, seed))
    if args.part in ("throughput", "both"):
        for name, overrides in throughput_modes(args.actors, args.num_envs):
            rates.append(throughput(name, overrides, args.steps))
    text = markdown(solved, rates)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
