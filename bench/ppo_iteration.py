"""Marginal PPO training throughput: the training call in graph mode and under XLA.

    python bench/ppo_iteration.py                              # pendulum_tf, cartpole_tf
    python bench/ppo_iteration.py pendulum_tf --calls 10 --intra-op-threads 1

For each config, builds the environments and PPO as `batchrl.runners.train` does and
the training call `LocalTrainer` makes, in graph mode (`train.jit_compile=false`, with
summaries into a temporary folder, as in training) and as one XLA program
(`train.jit_compile=true`). Reports the first call (tracing, graph optimization or XLA
compilation, and the steps) in seconds, and environment steps per second over `--calls`
later calls (the median call). Run it from another checkout (PYTHONPATH) to measure that
code the same way. The intra-op thread count is TensorFlow's (0: its default, one per
core); it must be set before TensorFlow runs anything, so it applies to the whole run.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time

import tensorflow as tf

from batchrl.config import load_run_config
from batchrl.runners import LocalTrainer, make_algorithm


def measure(name: str, jit_compile: bool, calls: int, overrides: list[str]) -> dict[str, float]:
    """Seconds of the first call, and steps per second of the median later call."""
    flag = f"train.jit_compile={str(jit_compile).lower()}"
    config = load_run_config(name, [*overrides, flag])
    tf.keras.utils.set_random_seed(config.train.seed)
    step = tf.Variable(0, dtype=tf.int64)
    env = LocalTrainer.make_batch_env(config, config.train.seed)
    try:
        trainer = LocalTrainer(config, make_algorithm(config, env, step), env)
        with tempfile.TemporaryDirectory() as logdir:
            writer = tf.summary.create_file_writer(logdir)
            context = contextlib.nullcontext() if jit_compile else writer.as_default(step=step)
            with context:
                seconds = []
                for _ in range(1 + calls):
                    start = time.perf_counter()
                    steps, stats = trainer.step()
                    int(stats["episodes"])  # Waits for the call.
                    seconds.append(time.perf_counter() - start)
                    step.assign_add(steps)
            writer.close()
        return {"first": seconds[0], "rate": steps / statistics.median(seconds[1:])}
    finally:
        env.close()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="*", default=["pendulum_tf", "cartpole_tf"])
    parser.add_argument("--calls", type=int, default=10, help="later calls to time")
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the modes")
    parser.add_argument("--intra-op-threads", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], help="an override, as in train")
    args = parser.parse_args(argv)
    tf.config.threading.set_intra_op_parallelism_threads(args.intra_op_threads)
    print("| config | mode | round | first call (s) | steps/s after it |")
    print("|---|---|---:|---:|---:|")
    for name in args.configs:
        for round_ in range(args.rounds):
            for mode, jit in (("graph", False), ("xla", True)):
                result = measure(name, jit, args.calls, args.set)
                print(
                    f"| `{name}` | {mode} | {round_ + 1} | {result['first']:.1f} "
                    f"| {result['rate']:,.0f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
