"""Episodes per second of an ES generation of graph-network routers: one batch vs one at a time.

Batched: the whole population's episodes (2N members, one episode each) run as one call
of `PopulationEvaluator` (graph mode, XLA, and XLA computing only the members whose
episode still runs, `es.member_chunk`) over `Routing` in TensorFlow ops, as `geant2_es`
trains.
One at a time: the published implementation's way, each member plays its episode in the
Gymnasium `RoutingEnv` (NumPy), the graph network called once per step on one
observation (a `tf.function`, as a Keras model call would be). Where the time goes: the
batched call is repeated with SAP in place of the network (environment only), and the
one-at-a-time loop times the network calls and the environment steps apart.

    python bench/routing_throughput.py --topology geant2 --pairs 32 --sequential 8 --repeats 2
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import harness
import numpy as np
import tensorflow as tf
from routing_heuristics import MAX_STEPS

from batchrl.algorithms.es.generation import PopulationEvaluator, PopulationPolicy
from batchrl.envs.routing import GYM_IDS, Heuristic, Routing, RoutingGraphFeatures
from batchrl.networks.graph import GraphPopulation
from batchrl.tools.episodes import EpisodeRecorder, first_episodes

SIZES = {"nsfnet": (25, 20), "geant2": (35, 35)}


def batched(net, topology, members, seed, repeats, jit_compile, member_chunk):
    env = Routing(members, seed=seed, topology=topology)
    policy = PopulationPolicy(net, env.action_space, members, 1, member_chunk=member_chunk)
    evaluator = PopulationEvaluator(env, policy, max_steps=MAX_STEPS, jit_compile=jit_compile)
    params = tf.stack([net.init_params(seed + m) for m in range(members)])
    start = time.perf_counter()
    evaluator(params)
    compile_time = time.perf_counter() - start
    seconds, steps = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        _, stats = evaluator(params)
        seconds.append(time.perf_counter() - start)
        steps += int(stats["steps"])
    return compile_time, float(np.median(seconds)), steps / repeats


def environment_only(topology, members, seed, repeats):
    """The same batch with SAP acting: what the environment and the loop cost."""
    env = Routing(members, seed=seed, topology=topology)
    recorder = EpisodeRecorder(Heuristic("sap", topology, seed=seed), members)
    run = tf.function(lambda: first_episodes(env, recorder, MAX_STEPS), jit_compile=True)
    run()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - start)
    return float(np.median(seconds))


def one_at_a_time(net, topology, episodes, seed):
    env = gym.make(GYM_IDS[topology])
    apply = tf.function(net.apply)
    observ, _ = env.reset(seed=seed)
    apply(net.init_params(0)[None], observ[None, None])  # Trace once, outside the timing.
    network_time = env_time = 0.0
    steps = 0
    for member in range(episodes):
        params = net.init_params(seed + member)[None]
        observ, _ = env.reset(seed=seed + member)
        done = False
        while not done:
            start = time.perf_counter()
            action = int(np.argmax(apply(params, observ[None, None])[0, 0]))
            middle = time.perf_counter()
            observ, _, terminated, truncated, _ = env.step(action)
            env_time += time.perf_counter() - middle
            network_time += middle - start
            done = terminated or truncated
            steps += 1
    return network_time + env_time, network_time, env_time, steps / episodes


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topology", default="geant2", choices=sorted(SIZES))
    parser.add_argument("--pairs", type=int, default=64, help="N: 2N members per generation")
    parser.add_argument("--sequential", type=int, default=16, help="episodes one at a time")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--modes",
        default="graph,xla,xla_skip",
        help="batched modes: graph, xla, xla_skip (XLA, finished members skipped in chunks)",
    )
    parser.add_argument("--member-chunk", type=int, default=16, help="es.member_chunk of xla_skip")
    args = parser.parse_args()
    net = GraphPopulation(RoutingGraphFeatures(args.topology), *SIZES[args.topology])
    members = 2 * args.pairs
    print(f"{args.topology}, {net.num_params} parameters; load {harness.load()}", flush=True)
    env_seconds = environment_only(args.topology, members, args.seed, args.repeats)
    modes = {"graph": (False, 0), "xla": (True, 0), "xla_skip": (True, args.member_chunk)}
    rates = {}
    for mode in args.modes.split(","):
        compile_time, seconds, length = batched(
            net, args.topology, members, args.seed, args.repeats, *modes[mode]
        )
        rates[mode] = members / seconds
        print(
            f"batched ({mode}): {members} episodes in {seconds:.2f} s (median of "
            f"{args.repeats}; first call {compile_time:.1f} s): {rates[mode]:.1f} episodes/s, "
            f"mean length {length / members:.1f}; load {harness.load()}",
            flush=True,
        )
    print(
        f"the same batch with SAP instead of the network (XLA): {env_seconds:.3f} s",
        flush=True,
    )
    total, network, env, length = one_at_a_time(net, args.topology, args.sequential, args.seed)
    print(
        f"one at a time (Gymnasium): {args.sequential} episodes in {total:.2f} s: "
        f"{args.sequential / total:.2f} episodes/s, mean length {length:.1f}; network "
        f"{100 * network / total:.1f}%, environment {100 * env / total:.1f}%",
        flush=True,
    )
    sequential = args.sequential / total
    for mode, rate in rates.items():
        print(f"ratio batched ({mode}) / one at a time: {rate / sequential:.2f}x")
    print(f"load {harness.load()}")


if __name__ == "__main__":
    main()
