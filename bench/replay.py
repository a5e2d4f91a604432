"""Prioritized replay at 1M transitions: batchrl's buffer in the graph against a numpy one.

    python bench/replay.py                       # capacity 1,000,000, batch 256
    python bench/replay.py --capacity 100000 --seconds 1 --json replay.json
    python bench/replay.py --memory-only --json results/replay_memory.json

One iteration adds a batch of transitions, samples a batch with importance weights and
sets the sampled transitions' priorities, as an off-policy learner does each update.
Transitions are HalfCheetah-v5's: 17 floats of observation and of next observation, 6 of
action, a reward and a discount. Methods, interleaved over `--repeats` rounds:

- `numpy`: a sum tree and ring of numpy arrays written for this benchmark, at its best:
  every operation vectorized over the batch (the tree descended level by level for all
  samples at once, priorities written and the parents recomputed level by level), as
  SB3-style Python buffers would do it if they were vectorized (baselines' and
  Stable-Baselines 2's SegmentTree loop over the samples in Python; slower still).
- `graph`: `batchrl.replay.PrioritizedReplay`, the iteration as one `tf.function` call.
- `xla`: the same call compiled by XLA.

Then the resident memory of full 1M-slot buffers of HalfCheetah-v5 transitions, each
measured in a fresh process as the growth of its resident set while the buffer is made
and filled: `UniformReplay` (whole transitions, each observation twice) and `StepReplay`
(each observation once, as DQN and SAC keep them by default), the latter filled by
pushing the steps of 100 agents whose episodes end every 1,000 steps, as HalfCheetah's
do. Ratios are numpy's seconds per iteration over each method's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import harness
import numpy as np
import tensorflow as tf

from batchrl.replay import PrioritizedReplay

OBSERV, ACTION = 17, 6  # HalfCheetah-v5.


def spec() -> dict:
    return {
        "observ": tf.TensorSpec([OBSERV], tf.float32),
        "action": tf.TensorSpec([ACTION], tf.float32),
        "reward": tf.TensorSpec([], tf.float32),
        "discount": tf.TensorSpec([], tf.float32),
        "next_observ": tf.TensorSpec([OBSERV], tf.float32),
    }


def batch(rng: np.random.Generator, size: int) -> dict:
    return {
        name: rng.standard_normal([size, *s.shape]).astype(np.float32) for name, s in spec().items()
    }


class NumpyPrioritized:
    """A proportional prioritized buffer in numpy, vectorized over the batch."""

    def __init__(self, capacity: int, alpha: float = 0.6, epsilon: float = 1e-6, seed=0):
        self.capacity, self.alpha, self.epsilon = capacity, alpha, epsilon
        self.leaves = 1 << (capacity - 1).bit_length()
        self.depth = self.leaves.bit_length() - 1
        self.tree = np.zeros(2 * self.leaves, np.float64)
        self.items = {n: np.zeros([capacity, *s.shape], np.float32) for n, s in spec().items()}
        self.head = self.size = 0
        self.max_priority = 1.0
        self.rng = np.random.default_rng(seed)

    def _set(self, indices, values):
        nodes = indices + self.leaves
        self.tree[nodes] = values
        for _ in range(self.depth):
            nodes = np.unique(nodes // 2)
            self.tree[nodes] = self.tree[2 * nodes] + self.tree[2 * nodes + 1]

    def add(self, items):
        count = len(items["reward"])
        indices = (self.head + np.arange(count)) % self.capacity
        for name, values in items.items():
            self.items[name][indices] = values
        self._set(indices, np.full(count, self.max_priority**self.alpha))
        self.head = (self.head + count) % self.capacity
        self.size = min(self.size + count, self.capacity)

    def sample(self, batch_size, beta):
        total = self.tree[1]
        points = (np.arange(batch_size) + self.rng.random(batch_size)) * total / batch_size
        nodes = np.ones(batch_size, np.int64)
        for _ in range(self.depth):
            left = 2 * nodes
            go_right = points >= self.tree[left]
            points = np.where(go_right, points - self.tree[left], points)
            nodes = np.where(go_right, left + 1, left)
        indices = np.minimum(nodes - self.leaves, self.size - 1)
        weights = (self.size * self.tree[indices + self.leaves] / total) ** -beta
        items = {name: values[indices] for name, values in self.items.items()}
        return indices, weights / weights.max(), items

    def update_priorities(self, indices, priorities):
        priorities = np.abs(priorities) + self.epsilon
        self.max_priority = max(self.max_priority, float(priorities.max()))
        self._set(indices, priorities**self.alpha)


def numpy_iteration(buffer, items, batch_size, priorities):
    buffer.add(items)
    indices, weights, sampled = buffer.sample(batch_size, 0.4)
    buffer.update_priorities(indices, priorities)
    return weights


def tf_iteration(buffer, batch_size, jit):
    def step(items, priorities):
        buffer.add(items)
        indices, weights, _ = buffer.sample(batch_size, 0.4)
        buffer.update_priorities(indices, priorities)
        return weights

    return tf.function(step, jit_compile=jit)


def rate(call, seconds: float) -> float:
    """Seconds per call, over at least `seconds` of calls after one warm-up."""
    call()
    count, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        call()
        count += 1
    return elapsed / count


def fill(buffer, capacity, rng, chunk=50_000):
    for start in range(0, capacity, chunk):
        size = min(chunk, capacity - start)
        buffer.add(batch(rng, size))  # Numpy arrays; batchrl's buffers convert them.


MEMORY = """
import os, resource, sys
import numpy as np, psutil, tensorflow as tf
sys.path.insert(0, {bench!r})
from replay import batch, spec
from batchrl.replay import StepReplay, UniformReplay
process = psutil.Process()
before = process.memory_info().rss
if {kind!r} == "uniform":
    buffer = UniformReplay({capacity}, spec())
    rng = np.random.default_rng(0)
    add = tf.function(buffer.add)
    for start in range(0, {capacity}, 50_000):
        add({{k: tf.constant(v) for k, v in batch(rng, min(50_000, {capacity} - start)).items()}})
else:
    agents = 100
    observ = tf.TensorSpec([17], tf.float32)
    buffer = StepReplay({capacity}, observ, tf.TensorSpec([6], tf.float32), agents, 1, 0.99)

    def step(count):
        ended = tf.fill([agents], count % 1000 == 999)
        values = tf.random.stateless_normal([agents, 17 + 6 + 1 + 17], [0, count])
        buffer.push(values[:, :17], values[:, 17:23], values[:, 23], ended & False, ended,
                    values[:, 24:])
        return count + 1

    @tf.function(autograph=False)  # Source given with -c: no AutoGraph.
    def push(first):
        tf.while_loop(lambda count: count < first + 1000, step, [first])

    for first in range(0, {capacity} // agents, 1000):
        push(tf.constant(first))
after = process.memory_info().rss
held = sum(v.shape.num_elements() * v.dtype.size for v in buffer.variables)
print(after - before, held, int(buffer.size()))
"""


def memory(capacity: int, kind: str) -> dict:
    """The resident growth of a full buffer, `kind` "uniform" (`UniformReplay`) or "step"
    (`StepReplay`), made and filled in a fresh process."""
    bench = os.path.dirname(os.path.abspath(__file__))
    code = MEMORY.format(bench=bench, capacity=capacity, kind=kind)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=900
    )
    grown, held, size = map(int, result.stdout.split())
    return {"resident_growth_bytes": grown, "variable_bytes": held, "transitions": size}


def print_memory(mem: dict) -> None:
    print("\nFull buffers of HalfCheetah-v5 transitions:\n")
    print("| buffer | transitions held | variables (MB) | resident growth (MB) |")
    print("|---|---:|---:|---:|")
    for kind, name in (("uniform", "UniformReplay"), ("step", "StepReplay (DQN, SAC)")):
        m = mem[kind]
        print(
            f"| {name} | {m['transitions']:,} | {m['variable_bytes'] / 1e6:,.0f} | "
            f"{m['resident_growth_bytes'] / 1e6:,.0f} |"
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--memory-only",
        action="store_true",
        help="measure memory only (no timing: loaded cores do)",
    )
    args = parser.parse_args(argv)
    run = harness.Run("replay")
    if args.memory_only:
        mem = {kind: memory(args.capacity, kind) for kind in ("uniform", "step")}
        print_memory(mem)
        if args.json:
            run.save({"args": vars(args), "memory": mem}, args.json)
        return
    rng = np.random.default_rng(0)
    items = batch(rng, args.batch)
    tf_items = {k: tf.constant(v) for k, v in items.items()}
    priorities = np.abs(rng.standard_normal(args.batch)).astype(np.float32)
    tf_priorities = tf.constant(priorities)

    numpy_buffer = NumpyPrioritized(args.capacity)
    fill(numpy_buffer, args.capacity, rng)
    calls = {"numpy": lambda: numpy_iteration(numpy_buffer, items, args.batch, priorities)}
    for name, jit in (("graph", False), ("xla", True)):
        buffer = PrioritizedReplay(args.capacity, spec())
        fill(buffer, args.capacity, rng)
        step = tf_iteration(buffer, args.batch, jit)
        calls[name] = lambda step=step: step(tf_items, tf_priorities).numpy()
    seconds = {name: [] for name in calls}
    for _ in range(args.repeats):
        for name, call in calls.items():
            seconds[name].append(rate(call, args.seconds))
    median = {name: statistics.median(values) for name, values in seconds.items()}
    mem = {kind: memory(args.capacity, kind) for kind in ("uniform", "step")}
    print(
        f"Prioritized replay, capacity {args.capacity:,}, batch {args.batch}: add + sample + "
        "priority update per iteration, median of "
        f"{args.repeats} interleaved rounds of {args.seconds:g} s.\n"
    )
    print("| method | microseconds per iteration | numpy ÷ this |")
    print("|---|---:|---:|")
    for name, value in median.items():
        print(f"| {name} | {value * 1e6:,.0f} | {median['numpy'] / value:.2f}x |")
    print_memory(mem)
    if args.json:
        run.save(
            {"args": vars(args), "seconds": seconds, "median": median, "memory": mem}, args.json
        )


if __name__ == "__main__":
    main()
