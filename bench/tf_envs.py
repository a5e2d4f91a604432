"""Steps per second of the environments in TensorFlow ops against Gymnasium's, one run.

    python bench/tf_envs.py
    python bench/tf_envs.py --envs CartPole-v1 --batch-sizes 1 64 --seconds 1

For each environment and batch size B, with the same policy (an MLP with two hidden layers
of 64 units) on both sides:

- `gymnasium`: Gymnasium's `SyncVectorEnv` of B environments stepped in a Python loop,
  the policy called through `tf.function` each step. (Classic-control steps take a few
  microseconds, so processes, as in `AsyncVectorEnv`, would only add pipe round trips;
  bench/throughput.py measures those.)
- `graph`: the port in `batchrl.envs` driven by `simulate`, 100 steps per graph call.
- `xla`: the same call compiled with `tf.function(jit_compile=True)`.

The table gives medians over `--repeats` interleaved runs and the ratio of the best
TensorFlow column to Gymnasium's.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys

import gymnasium as gym
import harness
import tensorflow as tf
from throughput import (
    PolicyOnly,
    policy_loop_rate,
    timed,
)  # bench/ is on the path of a script run from it.

from batchrl import envs
from batchrl.tools.simulate import simulate

STEPS_PER_CALL = 100


def gymnasium_rate(env_id, batch_size, seconds):
    vector = gym.vector.SyncVectorEnv([functools.partial(gym.make, env_id)] * batch_size)
    return policy_loop_rate(vector, seconds, steps=10)


def tensorflow_rate(env_id, batch_size, seconds, jit):
    env = envs.make(env_id, batch_size, seed=0)
    algo = PolicyOnly(env.observation_space, env.action_space)
    call = tf.function(lambda: simulate(env, algo, steps=STEPS_PER_CALL), jit_compile=jit)
    return timed(lambda: int(call()["steps"]), seconds)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["Pendulum-v1", "CartPole-v1"])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 16, 256, 4096])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)

    run = harness.Run("tf_envs")
    results = {}
    for env_id in args.envs:
        for batch_size in args.batch_sizes:
            runs = {"gymnasium": [], "graph": [], "xla": []}
            for _ in range(args.repeats):
                runs["gymnasium"].append(gymnasium_rate(env_id, batch_size, args.seconds))
                runs["graph"].append(tensorflow_rate(env_id, batch_size, args.seconds, False))
                runs["xla"].append(tensorflow_rate(env_id, batch_size, args.seconds, True))
            row = {key: statistics.median(values) for key, values in runs.items()}
            results.setdefault(env_id, {})[batch_size] = row
            print(f"{env_id} B={batch_size}: {row}", file=sys.stderr)
    print(markdown(results))
    if args.json:
        run.save({"results": results}, args.json)


def markdown(results):
    lines = [
        "| environment | B | gymnasium | graph | xla | best ÷ gymnasium |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for env_id, rows in results.items():
        for batch_size, row in rows.items():
            best = max(row["graph"], row["xla"])
            lines.append(
                f"| {env_id} | {batch_size} | {row['gymnasium']:,.0f} | {row['graph']:,.0f} "
                f"| {row['xla']:,.0f} | {best / row['gymnasium']:,.1f} |"
            )
    # Best against best, as the report's row compares them: each side at its own best
    # batch size (a ratio at one batch size flatters B = 1, where Gymnasium is weakest).
    best = {}
    for env_id, rows in results.items():
        tf_rate = max(max(r["graph"], r["xla"]) for r in rows.values())
        best[env_id] = tf_rate / max(r["gymnasium"] for r in rows.values())
    lines += [
        "",
        "Best against best: " + ", ".join(f"{k} {v:,.0f}x" for k, v in best.items()) + ".",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
