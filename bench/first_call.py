"""The parts of PPO's first training call: tracing, then compiling (or loading) and running.

    python bench/first_call.py                                  # this checkout
    python bench/first_call.py --code new=. old=/tmp/old --rounds 2

For each checkout (`name=path`, put first on PYTHONPATH), config and mode, a fresh
process builds the environments and PPO as `batchrl.runners.train` does and times:

- `trace`: `get_concrete_function()` of the training call (Python builds the graph);
- `first`: the first call after tracing (graph mode: graph optimization and the nested
  XLA minibatch step's compilation; XLA: lowering to HLO and compiling, or lowering and
  loading the program from the persistent cache);
- `ops`: the graph's nodes, with those of its functions (while bodies, conditionals).

Modes: `graph`; `xla-cold`, XLA with an empty cache folder; `xla-warm`, XLA again with
the folder the cold run filled. Checkouts alternate within each round, so a slow moment
of this shared machine hits both alike.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from child import run_json

CHILD = """
import contextlib, json, sys, time
from batchrl.runners.train import use_xla_cache
name, mode, cache = sys.argv[1], sys.argv[2], sys.argv[3]
if mode != "graph":
    use_xla_cache(cache)
import tensorflow as tf
from batchrl.runners import LocalTrainer, make_algorithm
from batchrl.runners.local import align_function_names
from batchrl.config import load_run_config
flag = "false" if mode == "graph" else "true"
config = load_run_config(name, [f"train.jit_compile={flag}"])
tf.keras.utils.set_random_seed(config.train.seed)
step = tf.Variable(0, dtype=tf.int64)
env = LocalTrainer.make_batch_env(config, config.train.seed)
trainer = LocalTrainer(config, make_algorithm(config, env, step), env)
# Graph mode records summaries as in training; XLA's call returns them as tensors.
writer = tf.summary.create_file_writer(cache + "/summaries")
with writer.as_default(step=step) if mode == "graph" else contextlib.nullcontext():
    align_function_names()
    start = time.perf_counter()
    graph = trainer._call.get_concrete_function().graph.as_graph_def()
    traced = time.perf_counter()
    int(trainer._call()["episodes"])
    done = time.perf_counter()
ops = len(graph.node) + sum(len(f.node_def) for f in graph.library.function)
print(json.dumps({"trace": traced - start, "first": done - traced, "ops": ops}))
"""

MODES = ("graph", "xla-cold", "xla-warm")


def measure(path: str, name: str, mode: str, cache: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([path, os.environ.get("PYTHONPATH", "")]))
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return run_json(CHILD, [name, mode, cache], f"{path} {name} {mode}", env, timeout=600)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["pendulum_tf", "cartpole_tf"])
    parser.add_argument("--code", nargs="+", default=["this=."], help="name=path checkouts")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    code = dict(item.split("=", 1) for item in args.code)
    code = {name: str(Path(path).resolve()) for name, path in code.items()}
    print("| round | config | code | mode | ops | trace s | first call after it s | sum s |")
    print("|---:|---|---|---|---:|---:|---:|---:|")
    for round_ in range(1, args.rounds + 1):
        for name in args.configs:
            for label, path in code.items():
                with tempfile.TemporaryDirectory() as cache:
                    for mode in MODES:
                        r = measure(path, name, mode, cache)
                        total = r["trace"] + r["first"]
                        print(
                            f"| {round_} | `{name}` | {label} | {mode} | {r['ops']:,} | "
                            f"{r['trace']:.2f} | {r['first']:.2f} | {total:.2f} |",
                            flush=True,
                        )


if __name__ == "__main__":
    main()
