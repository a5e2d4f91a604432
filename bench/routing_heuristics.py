"""Mean return of the routing heuristics on NSFNET and GEANT2, beside a reference SAP figure.

Each network of a batch of in-graph `Routing` environments plays one whole episode with
the heuristic, in one XLA-compiled call (`first_episodes`); the first episode of each
network counts. bench/routing_es.py and the other routing scripts score SAP with `evaluate`.

    python bench/routing_heuristics.py --episodes 1000 --seed 0
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import tensorflow as tf

from batchrl.envs.routing import HEURISTICS, Heuristic, Routing
from batchrl.tools.episodes import EpisodeRecorder, first_episodes

# SAP over 1000 episodes of the authors' environment (BNN-UPC/DRL-ES-OTN), standard error
# about 0.3: a figure from a written summary of their code, not reproduced here and not in
# the paper (arXiv:2202.00360), which gives no SAP numbers in its text.
REFERENCE_SAP = {"nsfnet": 26.6, "geant2": 22.2}
# The bound on one episode of every routing evaluation (heuristics, routers; episodes end
# long before it); an episode still running then is an error, not a short return.
MAX_STEPS = 10_000


def topology_name(topology) -> str:
    """The name of `topology`: a name as it is, or a `Topology`'s or `TopologySet`'s."""
    return getattr(topology, "name", topology)


def finished_returns(recorder: EpisodeRecorder, what: str) -> np.ndarray:
    """The first-episode returns [B] that `recorder` holds after `first_episodes`.

    Raises RuntimeError, naming `what` and the networks, if an episode did not finish
    within `MAX_STEPS` steps (`first_episodes` would count it as it stands).
    """
    unfinished = np.flatnonzero(~recorder.finished.numpy())
    if unfinished.size:
        raise RuntimeError(
            f"{what}: networks {unfinished[:10].tolist()} ({unfinished.size} in all) "
            f"did not finish an episode in {MAX_STEPS} steps"
        )
    return recorder.first_episodes()[0].numpy()


def evaluate(topology, heuristic: str, episodes: int, seed: int, jit_compile=True) -> np.ndarray:
    """The returns [episodes] of the first episode of each of `episodes` networks of a
    `Routing` batch with `seed`, played by `heuristic`, in one XLA call (one graph call
    without `jit_compile`, as for a config with `train.jit_compile=false`).

    `topology` is a name, a `Topology` or a `TopologySet` (network i of a mixed batch
    routes on topology i mod T). Raises if an episode outlasts `MAX_STEPS` steps.
    """
    env = Routing(episodes, seed=seed, topology=topology)
    recorder = EpisodeRecorder(Heuristic(heuristic, topology, seed=seed), episodes)
    tf.function(lambda: first_episodes(env, recorder, MAX_STEPS), jit_compile=bool(jit_compile))()
    return finished_returns(recorder, f"{heuristic} on {topology_name(topology)}")


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
