"""MinAtar Breakout at a fixed wall-clock budget: Ape-X on Ray beside DQN and IMPALA.

    python bench/minatar_budget.py                                  # 180 s, seeds 0 1 2
    python bench/minatar_budget.py --seconds 600 --seeds 0 1 2 3 4
    python bench/minatar_budget.py --presets breakout_minatar_dqn --seconds 30 --seeds 0
    python bench/minatar_budget.py --presets breakout_minatar:train.total_steps=6000000

A preset may carry overrides of its own after a colon, `NAME:KEY=VALUE,KEY=VALUE`: the
IMPALA preset finishes its 2M steps in about a minute here, and with
`train.total_steps` raised its learning-rate schedule spans the budget instead.

Each preset runs through the train script, as a user runs it, with
`train.max_seconds=--seconds`: training stops after the call that passes the budget
(counted from the first training call, so Ray's start-up and the process's imports are
outside it, tracing inside), then the final evaluation scores the greedy policy (each
preset's own: 32 episodes on 8 environments, so the same on every side). Evaluations
during training are turned off (`train.eval_every` past the budget) so that none of the
budget goes to them. Runs go one after another, seed by seed, interleaving the presets so
that a drift of the machine's speed touches all of them alike. Each row: the final
returns per seed, their median, and the environment steps each run reached.

The presets: `breakout_minatar` (synchronous IMPALA, 32 environments, local runner),
`breakout_minatar_dqn` (DQN as in the MinAtar paper: one environment, an update per
step) and `breakout_minatar_apex_ray` (Ape-X: 4 actors of 8 environments, 2 shards, the
learner in the trainer's process). On 2 cores the 4 actors, 2 shards and the learner
share the same two cores the others use alone.

Results go to bench/results/minatar.json (`--output`) through bench/harness.py.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
from report import train_preset  # noqa: E402

PRESETS = (
    "breakout_minatar_apex_ray",
    "breakout_minatar_dqn",
    "breakout_minatar",
    "breakout_minatar:train.total_steps=6000000",  # Its schedule over the budget.
)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=180)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--presets", nargs="+", default=list(PRESETS))
    parser.add_argument("--output", default=str(harness.RESULTS / "minatar.json"))
    args = parser.parse_args(argv)
    overrides = [f"train.max_seconds={args.seconds}", "train.eval_every=1000000000"]
    argv = sys.argv[1:] if argv is None else argv
    record = harness.Run("minatar", ["bench/minatar_budget.py", *argv])
    result = {
        "seconds": args.seconds,
        "runs": {preset: [] for preset in args.presets},
    }
    for seed in args.seeds:
        for preset in args.presets:
            name, _, extra = preset.partition(":")
            run = train_preset(name, seed, overrides + [x for x in extra.split(",") if x])
            result["runs"][preset].append(run)
            print(
                f"{preset} seed {seed}: {run['final']:.2f} after {run['steps']:,} steps "
                f"({run['train_seconds']:.0f} s in the loop)",
                flush=True,
            )
    print(f"\nMinAtar Breakout after {args.seconds} s (load {record.header['load_before']} -> "
          f"{harness.load()}):")  # fmt: skip
    for preset, runs in result["runs"].items():
        finals = [run["final"] for run in runs]
        steps = [run["steps"] for run in runs]
        print(
            f"  {preset:28s} median {statistics.median(finals):6.2f}  "
            f"finals {', '.join(f'{x:.2f}' for x in finals)}  "
            f"steps {', '.join(f'{x:,}' for x in steps)}"
        )
    record.save(result, args.output)


if __name__ == "__main__":
    main()
