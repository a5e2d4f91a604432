"""Start-up cost of a training call: tracing, the first call and a later one.

    python bench/tracing.py                        # pendulum and cartpole_impala
    python bench/tracing.py cheetah --set env.num_envs=4
    python bench/tracing.py pendulum --calls 30      # the steady cost, median of 30 calls

For each config, builds the environments and the algorithm as `batchrl.runners.train`
does (`LocalTrainer.make_batch_env`, `make_algorithm`) and times, in seconds: `trace`,
tracing into a graph the call `LocalTrainer` makes, `simulate` of `train.steps_per_call`
steps (Python: autograph and op construction); `first`, the first call (graph
optimization, then the steps and any update); `later`, the median of the `--calls` calls
after it (default 1: the second call; the steady cost).
`trace + first` is what the train script reports as its first training call, less
environment and model construction. Summaries go to a temporary folder, as in training.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import tensorflow as tf

from batchrl.config import load_run_config
from batchrl.runners import LocalTrainer, make_algorithm
from batchrl.tools.simulate import simulate


def measure(name: str, overrides: list[str], calls: int = 1) -> dict[str, float]:
    """Seconds to trace, to run the first call, and the median of `calls` later calls."""
    config = load_run_config(name, overrides)
    step = tf.Variable(0, dtype=tf.int64)
    if config.runner.name != "local":
        raise ValueError(f"Config {name!r} uses runner {config.runner.name!r}, not 'local'.")
    env = LocalTrainer.make_batch_env(config, config.train.seed)
    try:
        algo = make_algorithm(config, env, step)
        steps = config.train.steps_per_call
        call = tf.function(lambda: simulate(env, algo, log=True, steps=steps))
        times = {}
        with tempfile.TemporaryDirectory() as logdir:
            with tf.summary.create_file_writer(logdir).as_default(step=step):
                start = time.perf_counter()
                call.get_concrete_function()
                times["trace"] = time.perf_counter() - start
                seconds = []
                for _ in range(1 + calls):
                    start = time.perf_counter()
                    call()
                    seconds.append(time.perf_counter() - start)
                times["first"], times["later"] = seconds[0], statistics.median(seconds[1:])
        return times
    finally:
        env.close()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="*", default=["pendulum", "cartpole_impala"])
    parser.add_argument("--set", action="append", default=[], help="an override, as in train")
    parser.add_argument("--calls", type=int, default=1, help="later calls to take the median of")
    args = parser.parse_args(argv)
    later = "second call" if args.calls == 1 else f"later call (median of {args.calls})"
    print(f"| config | trace | first call | {later} |")
    print("|---|---:|---:|---:|")
    for name in args.configs:
        times = measure(name, args.set, args.calls)
        print(f"| `{name}` | {times['trace']:.1f} | {times['first']:.1f} | {times['later']:.3f} |")


if __name__ == "__main__":
    main()
