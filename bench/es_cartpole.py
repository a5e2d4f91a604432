"""CartPole-v1 to 475: evolution strategies (`cartpole_es`) beside PPO (`cartpole_tf`).

    python bench/es_cartpole.py                  # seeds 0 1 2
    python bench/es_cartpole.py --seeds 0 --eval-every 8192

For each seed, one method after the other (so that a slow moment of this shared machine
hits both alike), `batchrl.runners.train` runs each preset as committed (CartPole-v1 in
TensorFlow ops, evaluated on Gymnasium's CartPole-v1) and stops it at its first
evaluation >= 475 (16 deterministic episodes every `--eval-every` environment steps;
ES evaluates at the end of the generation that crosses the mark). Budgets are the
presets' own: 300,000 steps for `cartpole_es`, 98,304 for `cartpole_tf` (its learning
rate decays linearly over them). The clock runs from the call of `train()` and includes
construction, tracing and XLA compilation, and the evaluations. ES counts the steps of
its members' first episodes, the episodes its fitness comes from.
"""

from __future__ import annotations

import argparse

import solving

TARGET = 475.0
METHODS = {"ES (`cartpole_es`)": "cartpole_es", "PPO (`cartpole_tf`)": "cartpole_tf"}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--eval-every", type=int, default=8192)
    args = parser.parse_args(argv)
    records = []
    for seed in args.seeds:
        for method, preset in METHODS.items():
            overrides = [f"train.eval_every={args.eval_every}"]
            records.append(solving.solve(method, preset, overrides, seed, TARGET))
    print(solving.markdown(records))
    for r in records:
        print(f"{r['method']} seed {r['seed']} evaluations: {r['evals']}")


if __name__ == "__main__":
    main()
