"""Atari with IMPALA's actor threads: per-actor inference against dynamic batching.

    python bench/atari_inference.py                        # 4 actors, deep and shallow
    python bench/atari_inference.py --actors 2 4 8 --seconds 60 --torsos deep

`atari_impala` (Pong, TorchBeast's preprocessing, games in worker processes) with the
threads runner, once with `threads.inference: actor` (each actor samples with its own
policy copy) and once with `dynamic` (one batcher thread samples for whichever actors
wait, up to all of them, waiting at most `--timeout` seconds for more). For each setting
it makes `--warmup` learner updates (tracing, the queue's first fill), then runs for
`--seconds` and prints environment steps per second and frames per second (4 frames a
step), and the mean number of actors per forward pass. The settings alternate, so that a
drift of the machine touches both. Run nothing else meanwhile.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness  # noqa: E402


def rate(
    torso: str,
    actors: int,
    inference: str,
    timeout: float,
    warmup: int,
    seconds: float,
    overrides: tuple[str, ...] = (),
):
    """Environment steps per second, and the mean actors per forward pass (dynamic).

    `overrides` are further `--set` strings for `atari_impala` (e.g. `env.num_envs=2`).
    """
    from batchrl.config import load_run_config
    from batchrl.runners.threads import ThreadsTrainer
    from batchrl.runners.train import make_algorithm

    config = load_run_config(
        "atari_impala",
        [
            f"network.torso={torso}",
            f"threads.num_actors={actors}",
            f"threads.inference={inference}",
            f"threads.inference_timeout={timeout}",
            *overrides,
        ],
    )
    algo = make_algorithm(config, ThreadsTrainer.make_batch_env(config, 0))
    trainer = ThreadsTrainer(config, algo)
    try:
        for _ in range(warmup):
            trainer.step()
        batcher = trainer.runner.batcher
        passes = len(batcher.batch_sizes) if batcher else 0
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            steps += trainer.step()[0]
        elapsed = time.perf_counter() - start
        sizes = batcher.batch_sizes[passes:] if batcher else []
        return steps / elapsed, (sum(sizes) / len(sizes) if sizes else 1.0)
    finally:
        trainer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actors", type=int, nargs="+", default=[4])
    parser.add_argument("--torsos", nargs="+", default=["deep", "shallow"])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=int, default=3, help="learner updates")
    parser.add_argument("--timeout", type=float, default=0.005)
    args = parser.parse_args()
    print(harness.Run("atari_inference").header, flush=True)
    for torso in args.torsos:
        for actors in args.actors:
            rates = {}
            for inference in ("actor", "dynamic"):
                steps, per_pass = rate(
                    torso, actors, inference, args.timeout, args.warmup, args.seconds
                )
                rates[inference] = steps
                print(
                    f"{torso:7s} {actors} actors, inference {inference:7s}: {steps:7.0f} "
                    f"steps/s ({4 * steps:7.0f} frames/s), {per_pass:.2f} actors a pass | "
                    f"load {harness.load()}",
                    flush=True,
                )
            print(f"  dynamic / actor: {rates['dynamic'] / rates['actor']:.2f}", flush=True)


if __name__ == "__main__":
    main()
