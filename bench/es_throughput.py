"""Generations of ES per second: the batched population against members one after another.

    python bench/es_throughput.py
    python bench/es_throughput.py --pairs 128 --repeats 3 --train-generations 40

The same ES (`cartpole_es` with `es.population` pairs, 2N members, one episode each,
CartPole-v1 in TensorFlow ops, the preset's MLP and observation statistics), the same
theta, and a whole generation each time: ask, evaluate every member, tell.

- `batched`: `GenerationTrainer.step`, the 2N members acting together on 2N
  environments, the generation's episodes one XLA call (`PopulationEvaluator`).
- `loop`: a Python loop over the 2N members, one episode at a time: the same
  `PopulationEvaluator` built for one member and one environment (one XLA call per
  episode), as published implementations run one episode per perturbation. Its members
  see the statistics frozen at the start of the generation, as `batched`'s do, and do
  not update them.
- `per-step` (unless `--no-per-step`): the published implementations' inner loop too,
  Gymnasium's CartPole-v1 stepped in Python and the member's policy called through
  `tf.function` once a step, as OpenAI's ES calls its policy once a step (statistics as
  in `loop`).

Both phases are measured: at the initial theta (episodes of about 10 to 30 steps) and
after `--train-generations` batched generations (or fewer, once the members' mean return
reaches 475), when most episodes last 500 steps. Between timed generations theta,
Adam's moments, the generation counter and the statistics are put back, so every method
times the same generation. Methods alternate within each of `--repeats` rounds; the
table gives medians. The first call of each method (XLA compilation) is timed apart.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import gymnasium as gym
import numpy as np
import tensorflow as tf

from batchrl.algorithms.es import ES, GenerationTrainer
from batchrl.algorithms.es.generation import OBSERV_CLIP
from batchrl.config import load_run_config
from batchrl.tools.environments import make_in_graph_env


def batched_generation(trainer):
    """One generation through the trainer; returns (episodes, steps of those episodes)."""
    steps, stats = trainer.step()
    return int(stats["episodes"]), steps


def loop_generation(algo, single):
    """One generation, member after member, each one episode in one call of `single`."""
    members = algo.strategy.ask()  # [2N, D]
    fitness, steps = [], 0
    for m in range(members.shape[0]):
        value, stats = single(members[m : m + 1])
        fitness.append(float(value[0]))
        steps += int(stats["steps"])
    algo.strategy.tell(np.array(fitness, np.float32))
    return len(fitness), steps


def per_step_generation(algo, env, act):
    """One generation, member after member, each episode stepped in Python."""
    members = algo.strategy.ask()  # [2N, D]
    mean = algo.observ_normalizer.mean.numpy().astype(np.float32)
    std = algo.observ_normalizer.std.numpy().astype(np.float32)
    fitness, steps = [], 0
    for m in range(members.shape[0]):
        params = members[m : m + 1]  # [1, D]
        observ, _ = env.reset()
        total, done = 0.0, False
        while not done:
            normalized = np.clip((observ - mean) / (std + 1e-8), -OBSERV_CLIP, OBSERV_CLIP)
            action = int(act(params, normalized[None, None].astype(np.float32)))
            observ, reward, terminated, truncated, _ = env.step(action)
            total, steps, done = total + reward, steps + 1, terminated or truncated
        fitness.append(total)
    algo.strategy.tell(np.array(fitness, np.float32))
    return len(fitness), steps


def measure(methods, algo, repeats):
    """Median episodes/s and steps/s of each method, every one from the same state."""
    state = [v.numpy() for v in algo.variables]

    def put_back():
        for variable, value in zip(algo.variables, state):
            variable.assign(value)

    first, rates = {}, {name: [] for name in methods}
    for name, fn in methods.items():  # Compilation, apart.
        start = time.perf_counter()
        fn()
        first[name] = time.perf_counter() - start
        put_back()
    for _ in range(repeats):
        for name, fn in methods.items():
            start = time.perf_counter()
            episodes, steps = fn()
            took = time.perf_counter() - start
            put_back()
            rates[name].append((episodes / took, steps / took, took))
            print(f"  {name}: {episodes} episodes, {steps} steps, {took:.2f} s", file=sys.stderr)
    medians = {}
    for name, values in rates.items():
        medians[name] = tuple(statistics.median(v[i] for v in values) for i in range(3))
    return first, medians


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--train-generations", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-per-step", action="store_true")
    args = parser.parse_args(argv)

    config = load_run_config(
        "cartpole_es", [f"es.population={args.pairs}", "train.jit_compile=true"]
    )
    batch_env = ES.make_batch_env(config, args.seed)
    algo = ES(batch_env, config, seed=args.seed)
    trainer = GenerationTrainer(config, algo, batch_env)
    # Without statistics updates: a member's episode must see the statistics the generation
    # started with, as in `batched` (and OpenAI's workers), not ones moved by the members
    # before it. (Their update costs a few microseconds a step.)
    single = algo.make_evaluator(make_in_graph_env(config.env, 1, args.seed + 1))
    methods = {
        "batched": lambda: batched_generation(trainer),
        "loop": lambda: loop_generation(algo, single),
    }
    if not args.no_per_step:
        gym_env = gym.make("CartPole-v1")
        gym_env.reset(seed=args.seed)
        network = algo.network
        act = tf.function(lambda p, o: tf.argmax(network.apply(p, o)[0, 0], output_type=tf.int32))
        methods["per-step"] = lambda: per_step_generation(algo, gym_env, act)

    rows = []
    for phase in ("initial theta", "trained theta"):
        if phase == "trained theta":
            for generation in range(args.train_generations):
                _, stats = trainer.step()
                mean = float(stats["mean_return"])
                print(f"training generation {generation}: mean return {mean:.1f}", file=sys.stderr)
                if mean >= 475:
                    break
        print(f"{phase} (generation {int(algo.strategy.generation)}):", file=sys.stderr)
        first, medians = measure(methods, algo, args.repeats)
        for name, (episodes, steps, took) in medians.items():
            ratio = medians["batched"][0] / episodes
            rows.append((phase, name, first[name], took, episodes, steps, ratio))

    print(f"2N = {2 * args.pairs} members, one episode each, median of {args.repeats}:\n")
    print("| theta | method | first call s | s per generation | episodes/s | steps/s "
          "| batched ÷ method |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|")
    for phase, name, first, took, episodes, steps, ratio in rows:
        print(
            f"| {phase} | {name} | {first:.1f} | {took:.3f} | {episodes:,.0f} | {steps:,.0f} "
            f"| {ratio:.1f} |"
        )


if __name__ == "__main__":
    main()
