"""Scores checkpoints of `routing_es.py` runs on held-out episodes, beside SAP.

`routing_es.py` evaluates theta every few generations on one fixed set of episodes, and a
run's best evaluation is picked on that same set, so it is biased upwards. This script
restores chosen checkpoints (a run's `--checkpoints` folder keeps its last three, and
its best in `best/`) and scores each on another fixed set (`--eval-seed`, `--episodes`),
which no run has seen:

    python bench/routing_heldout.py --config geant2_es --seed 0 ck/ckpt-210 ck/ckpt-230

Give the overrides the run was trained with (`--set key=value`) when they change the
network; the ES settings do not matter here.
"""

from __future__ import annotations

import argparse
import os

import tensorflow as tf
from routing_es import fixed_set_evaluator, mean_text
from routing_heuristics import evaluate as heuristic_returns

from batchrl.algorithms.es import ES
from batchrl.config.run_config import load_run_config


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoints", nargs="+", help="checkpoint prefixes (ckpt-N)")
    parser.add_argument("--config", default="geant2_es")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--eval-seed", type=int, default=777)
    parser.add_argument("--set", action="append", default=[], help="a config override")
    args = parser.parse_args()
    for prefix in args.checkpoints:
        if not os.path.exists(prefix + ".index"):
            parser.error(f"{prefix}: no checkpoint there (expected {prefix}.index)")
    config = load_run_config(args.config, [f"train.seed={args.seed}", *args.set])
    algo = ES(ES.make_batch_env(config, args.seed), config, seed=args.seed)
    topology = config.network.topology
    evaluate = fixed_set_evaluator(
        algo.network, topology, args.episodes, args.eval_seed, config.es.member_chunk
    )
    sap = heuristic_returns(topology, "sap", args.episodes, args.eval_seed)
    print(f"{args.config}: {args.episodes} held-out episodes (seed {args.eval_seed})")
    print(f"SAP: {mean_text(sap)}", flush=True)
    for prefix in args.checkpoints:
        tf.train.Checkpoint(algo=algo).restore(prefix).expect_partial()
        generation = int(algo.strategy.generation)
        print(f"{prefix} (generation {generation}): {mean_text(evaluate(algo.strategy.theta))}")


if __name__ == "__main__":
    main()
