"""PPO on CartPole-v1 in TensorFlow ops: wall-clock to 475, graph mode against XLA.

    python bench/ppo_cartpole.py                 # seeds 0 1 2
    python bench/ppo_cartpole.py --seeds 0 --modes xla --xla-cache /tmp/cache

For each seed, one mode after the other (so that a slow moment of this shared machine
hits both alike), `batchrl.runners.train` runs `cartpole_tf` for at most 500k steps with
`train.jit_compile=false` (each training call a graph) and `true` (each training call
one XLA program; evaluations during training on the TensorFlow port, one XLA program a
round), evaluating the deterministic policy on 16 episodes every 10,240 steps, and stops
at its first evaluation >= 475 (`bench/solving.py`). The clock runs from the call of
`train()`: construction, tracing, XLA compilation and the evaluations are included.

XLA's persistent compilation cache (`train.xla_cache`) serves a program to a later
process whose tracing went the same way, never to a second run in the same process
(function names carry a process-wide counter). `--xla-cache DIR` names its folder for
this process; the default, '', leaves it off so that every XLA run compiles. To time
runs that find their program in the cache, run one seed per process with the same folder:
the first process fills it.
"""

from __future__ import annotations

import argparse

import solving

from batchrl.runners.train import use_xla_cache

TARGET = 475.0
BUDGET = 500_000
MODES = {
    "graph": ("cartpole_tf, graph", ["train.jit_compile=false"]),
    "xla": ("cartpole_tf, XLA", ["train.jit_compile=true"]),
}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--xla-cache", default="", help="folder of XLA's compilation cache")
    args = parser.parse_args(argv)
    use_xla_cache(args.xla_cache)  # Before anything compiles: TF reads it once.
    records = []
    for seed in args.seeds:
        for mode in args.modes:
            method, overrides = MODES[mode]
            overrides = [
                *overrides,
                f"train.total_steps={BUDGET}",
                "train.eval_every=10240",
                f"train.xla_cache='{args.xla_cache}'",
            ]
            records.append(solving.solve(method, "cartpole_tf", overrides, seed, TARGET))
    print(solving.markdown(records))


if __name__ == "__main__":
    main()
