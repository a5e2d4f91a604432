"""PPO on CartPole-v1 in TensorFlow ops: wall-clock to 475, graph mode against XLA.

    python bench/ppo_cartpole.py                 # seeds 0 1 2
    python bench/ppo_cartpole.py --seeds 0

For each seed, one mode after the other (so that a slow moment of this shared machine
hits both alike), `batchrl.runners.train` runs `cartpole_tf` for at most 500k steps with
`train.jit_compile=false` (each training call a graph) and `true` (each training call
one XLA program; evaluations during training on the TensorFlow port, one XLA program a
round), evaluating the deterministic policy on 16 episodes every 10,240 steps, and stops
at its first evaluation >= 475 (`bench/solving.py`). The clock runs from the call of
`train()`: construction, tracing, XLA compilation and the evaluations are included.
"""

from __future__ import annotations

import argparse

import solving

TARGET = 475.0
BUDGET = 500_000
MODES = {
    "cartpole_tf, graph": ["train.jit_compile=false"],
    "cartpole_tf, XLA": ["train.jit_compile=true"],
}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    args = parser.parse_args(argv)
    records = []
    for seed in args.seeds:
        for method, overrides in MODES.items():
            overrides = [*overrides, f"train.total_steps={BUDGET}", "train.eval_every=10240"]
            records.append(solving.solve(method, "cartpole_tf", overrides, seed, TARGET))
    print(solving.markdown(records))


if __name__ == "__main__":
    main()
