"""Where the time of a PPO training call goes: TensorFlow's profiler, summed by event name.

    python bench/ppo_profile.py pendulum_tf             # graph mode
    python bench/ppo_profile.py pendulum_tf --xla       # train.jit_compile: one XLA program

Builds the environments and the algorithm as `batchrl.runners.train` does and the call
`LocalTrainer` makes, runs it twice, then profiles `--calls` calls with
`tf.profiler.experimental`. The trace is converted with the converter TensorFlow ships
(`xspace_to_tools_data`, which tensorboard-plugin-profile calls; not a public API), and
the durations of its events are summed per thread and name and printed per call, the
largest first: executor and thunk spans, op kernels in graph mode, HLO fusions and dots
under XLA. Spans nest, so the rows overlap. The profiler adds its own overhead.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import glob
import json
import tempfile

import tensorflow as tf
from tensorflow.python.profiler.internal import _pywrap_profiler_plugin

from batchrl.config import load_run_config
from batchrl.runners import LocalTrainer, make_algorithm


def profile(name: str, xla: bool, calls: int, overrides: list[str]) -> dict:
    """{(thread, event name): (microseconds per call, events per call)}."""
    flag = f"train.jit_compile={str(xla).lower()}"
    config = load_run_config(name, [*overrides, flag])
    step = tf.Variable(0, dtype=tf.int64)
    env = LocalTrainer.make_batch_env(config, config.train.seed)
    try:
        trainer = LocalTrainer(config, make_algorithm(config, env, step), env)
        with tempfile.TemporaryDirectory() as folder:
            writer = tf.summary.create_file_writer(folder + "/train")
            with contextlib.nullcontext() if xla else writer.as_default(step=step):
                for _ in range(2):
                    int(trainer.step()[1]["episodes"])
                tf.profiler.experimental.start(folder + "/profile")
                for _ in range(calls):
                    int(trainer.step()[1]["episodes"])
                tf.profiler.experimental.stop()
            path = glob.glob(folder + "/profile/**/*.xplane.pb", recursive=True)[0]
            data, _ = _pywrap_profiler_plugin.xspace_to_tools_data([path], "trace_viewer@", {})
    finally:
        env.close()
    events = json.loads(data)["traceEvents"]
    threads = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    totals = collections.defaultdict(lambda: [0.0, 0])
    for event in events:
        if event.get("ph") == "X":
            key = (threads.get((event["pid"], event.get("tid")), "?"), event["name"])
            totals[key][0] += event.get("dur", 0.0)
            totals[key][1] += 1
    return {key: (dur / calls, count / calls) for key, (dur, count) in totals.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default="pendulum_tf")
    parser.add_argument("--xla", action="store_true", help="train.jit_compile=true")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--set", action="append", default=[], help="an override, as in train")
    args = parser.parse_args(argv)
    totals = profile(args.config, args.xla, args.calls, args.set)
    print("| ms per call | events per call | thread | event |")
    print("|---:|---:|---|---|")
    for (thread, name), (dur, count) in sorted(totals.items(), key=lambda kv: -kv[1][0])[
        : args.top
    ]:
        print(f"| {dur / 1000:.2f} | {count:,.0f} | {thread[:30]} | {name[:60]} |")


if __name__ == "__main__":
    main()
