"""Seconds per PPO update with each minibatch step compiled by XLA, and without.

    python bench/ppo_update.py                      # pendulum, cheetah and mujoco
    python bench/ppo_update.py cheetah --updates 5

For each config, builds PPO on the config's environment spaces and batch size, fills its
rollout buffer (`algo.rollout.data`) with standard normal numbers (the update's cost does
not depend on the values), and times whole updates, `algo.learn(algo.rollout.read())`
(advantages, `epochs` x `minibatches` gradient steps, KL and summaries into a temporary
folder), in a `tf.function`, as training runs them at the end of each rollout:
`ppo.jit_update=false` (graph mode) and `true` (each minibatch step one XLA cluster),
alternating, `--repeats` rounds of `--updates` updates each. `first` is the first call of
each: tracing, graph optimization and, with XLA, compilation. Environments are not
stepped.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import tensorflow as tf

from batchrl.config import load_run_config
from batchrl.runners import make_algorithm
from batchrl.tools.environments import make_in_graph_env


def build(name: str, jit_update: bool):
    """PPO for config `name` with a full rollout buffer, and its update as a tf.function."""
    config = load_run_config(name, [f"ppo.jit_update={str(jit_update).lower()}"])
    tf.keras.utils.set_random_seed(0)
    env = make_in_graph_env(config.env, config.env.num_envs, 0)
    try:
        algo = make_algorithm(config, env, tf.Variable(0, dtype=tf.int64))
    finally:
        env.close()
    noise = tf.random.Generator.from_seed(0)
    for buffer in algo.rollout.data.values():  # [T, B, ...] each
        if buffer.dtype == tf.float32:
            buffer.assign(noise.normal(buffer.shape))
    return config, tf.function(lambda: algo.learn(algo.rollout.read()))


def measure(name: str, updates: int, repeats: int) -> dict:
    modes = {"graph": build(name, False), "xla": build(name, True)}
    config = modes["graph"][0].ppo
    times = {mode: [] for mode in modes}
    first = {}
    with tempfile.TemporaryDirectory() as logdir:
        with tf.summary.create_file_writer(logdir).as_default(step=0):
            for mode, (_, update) in modes.items():
                start = time.perf_counter()
                update()
                first[mode] = time.perf_counter() - start
            for round_ in range(repeats):
                order = list(modes) if round_ % 2 == 0 else list(modes)[::-1]
                for mode in order:
                    update = modes[mode][1]
                    start = time.perf_counter()
                    for _ in range(updates):
                        update()
                    times[mode].append((time.perf_counter() - start) / updates)
    steps = config.epochs * config.minibatches
    return {
        mode: {"first": first[mode], "update": statistics.median(t), "grad_steps": steps}
        for mode, t in times.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("configs", nargs="*", default=["pendulum", "cheetah", "mujoco"])
    parser.add_argument("--updates", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print("| config | mode | first call s | s per update | gradient steps/s | graph ÷ xla |")
    print("|---|---|---:|---:|---:|---:|")
    for name in args.configs:
        result = measure(name, args.updates, args.repeats)
        for mode, r in result.items():
            ratio = result["graph"]["update"] / r["update"]
            print(
                f"| {name} | {mode} | {r['first']:.1f} | {r['update']:.3f} | "
                f"{r['grad_steps'] / r['update']:,.0f} | {ratio:.2f} |",
                flush=True,
            )
    print(f"TensorFlow {tf.__version__}, {args.updates} updates x {args.repeats} rounds.")


if __name__ == "__main__":
    main()
