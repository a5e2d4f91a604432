"""Whole preset runs as a user starts them: graph mode, XLA compiling, XLA from the cache.

    python bench/preset_runs.py                          # pendulum_tf, cartpole_tf
    python bench/preset_runs.py cartpole_tf --rounds 3

For each round and config, with a new XLA cache folder, three fresh processes run
`python -m batchrl.scripts.train --config=C` with `train.jit_compile=false` (graph),
`true` (XLA, compiling into the empty folder) and `true` again (XLA, loading the program
from it). Reported: the first training call and the whole run as the train script states
them (`train()`: tracing, compilation, training, evaluations, checkpoints and export), the
process's wall-clock (with Python's and TensorFlow's imports), and the final evaluation.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

MODES = {"graph": "false", "XLA, compiling": "true", "XLA, from the cache": "true"}


def run(name: str, jit_compile: str, cache: str) -> dict:
    with tempfile.TemporaryDirectory() as logdir:
        command = [
            sys.executable, "-m", "batchrl.scripts.train", f"--config={name}",
            f"--logdir={logdir}", "--set", f"train.jit_compile={jit_compile}",
            "--set", f"train.xla_cache={cache}",
        ]  # fmt: skip
        env = dict(os.environ)
        env.pop("TF_XLA_FLAGS", None)  # The cache folder comes from the config.
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        start = time.perf_counter()
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        wall = time.perf_counter() - start
    if result.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr[-2000:]}")
    first = re.search(r"First training call, tracing included: ([\d.]+) s", result.stderr)
    final = re.search(r"eval (-?[\d.]+) \| ([\d.]+) s at", result.stderr)
    if not (first and final):
        raise RuntimeError(f"Unexpected output of {' '.join(command)}:\n{result.stderr[-2000:]}")
    return {
        "first": float(first.group(1)),
        "train": float(final.group(2)),
        "wall": wall,
        "eval": float(final.group(1)),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="*", default=["pendulum_tf", "cartpole_tf"])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    print("| round | config | mode | first call s | train() s | process s | final eval |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for round_ in range(1, args.rounds + 1):
        for name in args.configs:
            with tempfile.TemporaryDirectory() as cache:
                for mode, jit_compile in MODES.items():
                    r = run(name, jit_compile, cache)
                    print(
                        f"| {round_} | `{name}` | {mode} | {r['first']:.1f} | {r['train']:.1f} "
                        f"| {r['wall']:.1f} | {r['eval']:.1f} |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
