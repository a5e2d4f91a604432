"""Mean return of the routing heuristics on NSFNET and GEANT2, beside a reference SAP figure.

Each network of a batch of in-graph `Routing` environments plays one whole episode with
the heuristic through `simulate` (XLA-compiled); the first episode of each network counts.

    python bench/routing_heuristics.py --episodes 1000 --seed 0
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import tensorflow as tf

from batchrl.envs.routing import HEURISTICS, Heuristic, Routing
from batchrl.tools.simulate import simulate

# SAP over 1000 episodes of the authors' environment (BNN-UPC/DRL-ES-OTN), standard error
# about 0.3: a figure from a written summary of their code, not reproduced here and not in
# the paper (arXiv:2202.00360), which gives no SAP numbers in its text.
REFERENCE_SAP = {"nsfnet": 26.6, "geant2": 22.2}


def evaluate(topology: str, heuristic: str, episodes: int, seed: int) -> np.ndarray:
    """The returns [episodes] of the first episode of `episodes` networks."""
    env = Routing(episodes, seed=seed, topology=topology)
    algo = Heuristic(heuristic, topology, seed=seed)
    # One step per call, read from the environment's variables. (This loop predates the
    # fix of EpisodeRecorder under XLA in 4d7264e; both now give the same returns: SAP
    # 66.64 on waxman-100-s0's 100 episodes of seed 12345 here and in routing_es.py.)
    run = tf.function(lambda: simulate(env, algo, steps=1), jit_compile=True)
    returns = np.full(episodes, np.nan)
    while np.isnan(returns).any():
        run()
        first = env.done.numpy() & np.isnan(returns)
        returns[first] = env.episode_return.numpy()[first]
    return returns


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"{args.episodes} episodes per row, seed {args.seed}; mean return +- standard error")
    print(f"{'topology':8s} {'heuristic':15s} {'mean':>7s} {'s.e.':>5s} {'REF':>5s} {'time':>6s}")
    for topology in ("nsfnet", "geant2"):
        for heuristic in HEURISTICS:
            start = time.perf_counter()
            returns = evaluate(topology, heuristic, args.episodes, args.seed)
            seconds = time.perf_counter() - start
            error = returns.std(ddof=1) / np.sqrt(len(returns))
            reference = REFERENCE_SAP[topology] if heuristic == "sap" else float("nan")
            print(
                f"{topology:8s} {heuristic:15s} {returns.mean():7.2f} {error:5.2f} "
                f"{reference:5.1f} {seconds:5.1f}s"
            )


if __name__ == "__main__":
    main()
