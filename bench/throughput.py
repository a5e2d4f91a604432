"""Environment steps per second through `simulate`, beside the baselines in the same run.

    python bench/throughput.py                      # Pendulum-v1 and HalfCheetah-v5
    python bench/throughput.py --envs Pendulum-v1 --num-envs 1 8 --seconds 1

For every environment id and batch size N, with the same policy (an MLP with two hidden
layers of 64 units) everywhere:

- `raw`: one environment stepped in a Python loop with random actions and no policy; the
  per-core limit. `2x raw` is the limit of this two-core machine.
- `vector`: Gymnasium's `AsyncVectorEnv` (shared memory on) stepped in a Python loop,
  the policy called through `tf.function` each step.
- `simulate/1` and `simulate/100`: `simulate` over `ExternalProcess` workers with
  `steps=1` and `steps=100` batched steps per graph call.
- `2 workers/100`: the N environments split over two `ExternalProcess` workers
  (`GroupedBatchEnv`, `env.envs_per_process` in a config), one per core.
- `in-process/100`: `simulate` over environments in the trainer's own process.

Each measurement runs for `--seconds` and is repeated `--repeats` times, interleaved, so
that a slow moment of this shared machine hits every method alike; the table shows
medians. It also measures the bridge overhead: the cost of one batched step through
`simulate` with an environment and an algorithm that do no work.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time

import gymnasium as gym
import numpy as np
import tensorflow as tf

from batchrl.core import Algorithm
from batchrl.networks import MLP
from batchrl.tools.batch_env import BatchEnv, GroupedBatchEnv, make_group
from batchrl.tools.external_process import ExternalProcess
from batchrl.tools.in_graph_batch_env import InGraphBatchEnv
from batchrl.tools.simulate import simulate

COLUMNS = ("vector", "simulate/1", "simulate/100", "2 workers/100", "in-process/100")


class PolicyOnly(Algorithm):
    """An MLP policy (64, 64) that acts and learns nothing, for timing."""

    def __init__(self, observation_space, action_space, zero=False):
        super().__init__()
        self._discrete = isinstance(action_space, gym.spaces.Discrete)
        size = action_space.n if self._discrete else int(np.prod(action_space.shape))
        self._high = None if self._discrete else tf.constant(action_space.high, tf.float32)
        self._zero = zero
        self._size = size
        self.policy = MLP([64, 64], size, "tanh", 0.01)
        self.policy(tf.zeros((1,) + observation_space.shape))

    def begin_episodes(self, agent_indices):
        pass

    def perform(self, agent_indices, observ):
        if self._zero:
            return tf.zeros([tf.shape(observ)[0], self._size])
        output = self.policy(observ)
        if self._discrete:
            return tf.argmax(output, -1, output_type=tf.int32)
        return tf.tanh(output) * self._high

    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        pass

    def end_episodes(self, agent_indices):
        pass


class NullEnv(gym.Env):
    """An environment that does no work, to time the bridge alone."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self):
        self._observ = np.zeros(1, np.float32)

    def reset(self, *, seed=None, options=None):
        return self._observ, {}

    def step(self, action):
        return self._observ, 0.0, False, False, {}


def timed(fn, seconds):
    """Calls `fn` (which returns the steps it took) until `seconds` pass; steps/s."""
    fn()  # Warm up: tracing, first resets.
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        steps += fn()
    return steps / (time.perf_counter() - start)


def raw_rate(env_id, seconds):
    env = gym.make(env_id)
    env.reset(seed=0)
    actions = [env.action_space.sample() for _ in range(1000)]

    def run():
        for action in actions:
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()
        return len(actions)

    try:
        return timed(run, seconds)
    finally:
        env.close()


def vector_rate(env_id, num_envs, seconds):
    # spawn: the trainer has TensorFlow loaded, which is not safe to fork.
    envs = gym.vector.AsyncVectorEnv(
        [functools.partial(gym.make, env_id)] * num_envs, shared_memory=True, context="spawn"
    )
    return policy_loop_rate(envs, seconds)


def policy_loop_rate(envs, seconds, steps=100):
    """Steps/s of a Gymnasium vector env in a Python loop with the policy; closes `envs`."""
    try:
        algo = PolicyOnly(envs.single_observation_space, envs.single_action_space)
        policy = tf.function(lambda observ: algo.perform(None, observ))
        observ, _ = envs.reset(seed=0)

        def run():
            nonlocal observ
            for _ in range(steps):
                action = policy(tf.convert_to_tensor(observ, tf.float32)).numpy()
                observ, *_ = envs.step(action)
            return steps * envs.num_envs

        return timed(run, seconds)
    finally:
        envs.close()


def simulate_rates(env_id, num_envs, seconds, workers, steps_list):
    """`simulate` over `workers` processes (0: in this process) that share `num_envs`."""
    constructor = functools.partial(gym.make, env_id)
    if not workers:
        batch = BatchEnv([constructor() for _ in range(num_envs)], blocking=True)
    elif workers == num_envs:
        envs = [ExternalProcess(constructor, name=f"{i}:{env_id}") for i in range(num_envs)]
        batch = BatchEnv(envs, blocking=False)
    else:
        sizes = [len(part) for part in np.array_split(np.arange(num_envs), workers)]
        groups = [ExternalProcess(functools.partial(make_group, constructor, n)) for n in sizes]
        batch = GroupedBatchEnv(groups, sizes, blocking=False)
    batch_env = InGraphBatchEnv(batch, seed=0)
    try:
        algo = PolicyOnly(batch_env.observation_space, batch_env.action_space)
        rates = {}
        for steps in steps_list:
            call = tf.function(functools.partial(simulate, batch_env, algo, steps=steps))
            rates[steps] = timed(lambda call=call: int(call()["steps"]), seconds)
        return rates
    finally:
        batch_env.close()


def bridge_overhead_us(num_envs, seconds):
    """Microseconds per batched step of `simulate` over NullEnvs, minus their own cost."""
    batch = BatchEnv([NullEnv() for _ in range(num_envs)], blocking=True)
    batch_env = InGraphBatchEnv(batch, seed=0)
    algo = PolicyOnly(batch_env.observation_space, batch_env.action_space, zero=True)
    call = tf.function(functools.partial(simulate, batch_env, algo, steps=100))
    graph = timed(lambda: 100 * int(call()["steps"] > 0), seconds)  # Batched steps/s.
    actions = np.zeros((num_envs, 1), np.float32)
    python = timed(lambda: [batch.step(actions) for _ in range(100)] and 100, seconds)
    return 1e6 / graph - 1e6 / python, 1e6 / python


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["Pendulum-v1", "HalfCheetah-v5"])
    parser.add_argument("--num-envs", nargs="+", type=int, default=[1, 4, 8, 16])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)

    results = {"bridge": {}, "envs": {}}
    for num_envs in (1, 16):
        overhead, python = bridge_overhead_us(num_envs, args.seconds)
        results["bridge"][num_envs] = {"overhead_us": overhead, "batch_step_us": python}
        print(
            f"bridge N={num_envs}: {overhead:.0f} us per batched step on top of "
            f"{python:.0f} us for BatchEnv.step in Python",
            file=sys.stderr,
        )
    for env_id in args.envs:
        table = results["envs"][env_id] = {"raw": [], "rows": {}}
        for num_envs in args.num_envs:
            runs = {key: [] for key in COLUMNS}
            for _ in range(args.repeats):
                table["raw"].append(raw_rate(env_id, args.seconds))
                runs["vector"].append(vector_rate(env_id, num_envs, args.seconds))
                rates = simulate_rates(env_id, num_envs, args.seconds, num_envs, [1, 100])
                runs["simulate/1"].append(rates[1])
                runs["simulate/100"].append(rates[100])
                workers = min(2, num_envs)
                rates = simulate_rates(env_id, num_envs, args.seconds, workers, [100])
                runs["2 workers/100"].append(rates[100])
                rates = simulate_rates(env_id, num_envs, args.seconds, 0, [100])
                runs["in-process/100"].append(rates[100])
            table["rows"][num_envs] = {key: statistics.median(v) for key, v in runs.items()}
            print(f"{env_id} N={num_envs}: {table['rows'][num_envs]}", file=sys.stderr)
        table["raw_median"] = statistics.median(table["raw"])
    print(markdown(results))
    if args.json:
        with open(args.json, "w") as file:
            json.dump(results, file, indent=2)


def markdown(results):
    lines = []
    for env_id, table in results["envs"].items():
        raw = table["raw_median"]
        lines += [
            f"**{env_id}**: raw loop {raw:,.0f} steps/s per core; two-core limit {2 * raw:,.0f}.",
            "",
            "| N | vector (b) | simulate/1 | simulate/100 | 2 workers/100 | in-process/100 "
            "| best ÷ (b) | best ÷ 2x raw |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for num_envs, row in table["rows"].items():
            best = max(row["simulate/100"], row["2 workers/100"], row["in-process/100"])
            cells = " | ".join(f"{row[key]:,.0f}" for key in COLUMNS)
            lines.append(
                f"| {num_envs} | {cells} | {best / row['vector']:.2f} | {best / (2 * raw):.2f} |"
            )
        lines.append("")
    for num_envs, bridge in results["bridge"].items():
        lines.append(
            f"Bridge overhead, N={num_envs}: {bridge['overhead_us']:.0f} µs per batched step "
            f"(BatchEnv.step alone: {bridge['batch_step_us']:.0f} µs)."
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
