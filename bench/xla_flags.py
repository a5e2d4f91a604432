"""XLA's CPU flags against its defaults: the first training call (compiling) and the calls after.

    python bench/xla_flags.py
    python bench/xla_flags.py --configs pendulum_tf cartpole_tf --rounds 2 --calls 48

For each config, round and flag set (`--flags`, each a quoted XLA_FLAGS string; '' are
the defaults), a fresh process with an empty XLA cache builds the config's trainer as
`batchrl.runners.train` does and times its first call (tracing, XLA's compilation, one
call) and then `--calls` more calls (environment steps per second). Flag sets alternate
within each round, so a slow moment of this shared machine hits every set alike; the
table gives each set's first call and steps per second as ratios to the defaults'.
"""

from __future__ import annotations

import argparse
import os
import tempfile

from child import run_json

CHILD = """
import json, sys, time
from batchrl.quiet import import_tensorflow
tf = import_tensorflow(init_devices=False)
from batchrl.runners.train import use_xla_cache
use_xla_cache(sys.argv[2])
from batchrl.config import load_run_config
from batchrl.runners import LocalTrainer, make_algorithm
config = load_run_config(sys.argv[1], ["train.jit_compile=true"])
tf.keras.utils.set_random_seed(config.train.seed)
step = tf.Variable(0, dtype=tf.int64)
env = LocalTrainer.make_batch_env(config, config.train.seed)
trainer = LocalTrainer(config, make_algorithm(config, env, step), env)
start = time.perf_counter()
per_call, stats = trainer.step()
int(stats["steps"])
first = time.perf_counter() - start
calls = int(sys.argv[3])
start = time.perf_counter()
for _ in range(calls):
    per_call, stats = trainer.step()
int(stats["steps"])
rate = calls * per_call / (time.perf_counter() - start)
print(json.dumps({"first": first, "rate": rate}))
"""

DEFAULT_FLAGS = [
    "",
    "--xla_backend_optimization_level=0",
    "--xla_cpu_use_fusion_emitters=false",
    "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false",
]


def measure(name: str, flags: str, calls: int) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, XLA_FLAGS=flags)
        return run_json(CHILD, [name, cache, str(calls)], f"{name} with XLA_FLAGS={flags!r}", env)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["pendulum_tf"])
    parser.add_argument("--flags", nargs="+", default=DEFAULT_FLAGS)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--calls", type=int, default=32, help="timed calls after the first")
    args = parser.parse_args(argv)
    print("| config | round | XLA_FLAGS | first call s | ÷ defaults' | steps/s | ÷ defaults' |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for name in args.configs:
        for round_ in range(1, args.rounds + 1):
            base = None
            for flags in args.flags:
                r = measure(name, flags, args.calls)
                base = base or r
                print(
                    f"| `{name}` | {round_} | `{flags or '(defaults)'}` | {r['first']:.2f} | "
                    f"{r['first'] / base['first']:.2f} | {r['rate']:,.0f} | "
                    f"{r['rate'] / base['rate']:.2f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
