"""The graph network on a mixed batch: its message sums, against the code they replaced.

On a family of topologies (a mixed batch, `env.topologies`), each vertex of a graph
sums the messages of its incoming edges in its own graph. `GraphCore.family_incoming`
computes them vertex by vertex from the vertex's list of senders, all graphs in one
plain gather; before (up to 7cbb082) the network computed one message per edge and
summed them with batched gathers (`batch_dims=2`). This times the two in one process, alternating,
the same seed on both sides, the median of `--repeats` after one call each to compile:

- ES generations of `mixed_es` (NSFNET and GEANT2; XLA, as it trains), in seconds per
  1,000 environment steps;
- a gradient of the actor and critic of `mixed_ppo` on a minibatch of 64 observations
  (graph mode, as it trains);
- the actor's forward pass (XLA) on a generated 100-node topology as a family of one (as
  bench/routing_large.py trains on it), for 64 members of a population, one
  observation each.

    python bench/graph_aggregation.py --repeats 5
"""

from __future__ import annotations

import argparse
import time

import harness
import numpy as np
import tensorflow as tf
from routing_es import build_es

from batchrl.config import load_run_config
from batchrl.envs.routing import Routing, RoutingGraphFeatures, load_topology
from batchrl.networks.graph import GraphCore, GraphNetwork, GraphPopulation, most_incoming


class BatchedCore(GraphCore):
    """The baseline, as `GraphCore` computed a family up to 7cbb082: one message per
    edge of each graph, from batched gathers (`batch_dims=2`) of the projections at its
    sender and receiver, and each vertex's sum from a batched gather of its incoming
    edges' messages."""

    def __init__(self, features, link_state_size, readout_units, steps):
        super().__init__(features, link_state_size, readout_units, steps)
        if not self.family:
            raise SystemExit(
                f"{features.name} is one topology, whose network sums by a [V, P] matrix as "
                "before: this compares mixed batches (env.topologies) only."
            )
        graphs = [np.asarray(e, np.int32).reshape(-1, 2) for _, e in features.graphs]
        most = max(len(e) for e in graphs)
        depth = max(most_incoming(features.num_vertices, e) for e in graphs)
        first = np.zeros([len(graphs), most], np.int32)  # Padded with (0, 0),
        second = np.zeros([len(graphs), most], np.int32)
        lists = np.full([len(graphs), features.num_vertices, depth], most, np.int32)
        for t, edges in enumerate(graphs):  # whose messages no vertex reads.
            first[t, : len(edges)], second[t, : len(edges)] = edges[:, 0], edges[:, 1]
            for v in range(features.num_vertices):
                ids = np.flatnonzero(edges[:, 1] == v)
                lists[t, v, : len(ids)] = ids
        self._edges = tuple(map(tf.constant, (first, second, lists)))

    def family_senders(self, which):
        return tuple(tf.gather(part, which) for part in self._edges), None

    def family_incoming(self, up, down, bias, senders, mask):
        first, second, lists = senders  # [M, G, P], [M, G, P], [M, G, V, D]
        upstream = tf.gather(up, first, batch_dims=2)  # [M, G, P, H]
        downstream = tf.gather(down, second, batch_dims=2)
        message = tf.nn.selu(upstream + downstream + bias)  # [M, G, P, H]
        message = tf.pad(message, [[0, 0], [0, 0], [0, 1], [0, 0]])  # [M, G, P + 1, H]
        return tf.reduce_sum(tf.gather(message, lists, batch_dims=2), axis=3)


def batched_core(core: GraphCore, features) -> BatchedCore:
    return BatchedCore(features, core.size, core.readout, core.steps)


def alternate(calls: dict, repeats: int) -> dict:
    """{name: [seconds, result] of each of `repeats` calls} of each of `calls` (name ->
    function), called once to compile, then in turn."""
    for call in calls.values():
        call()
    runs = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            result = call()
            runs[name].append((time.perf_counter() - start, result))
    return runs


def medians(timed: dict) -> tuple[dict, list]:
    """({name: median seconds}, [each side's last result]) of `alternate`'s runs."""
    median = {name: float(np.median([s for s, _ in values])) for name, values in timed.items()}
    return median, [values[-1][1] for values in timed.values()]


def es_generation(config: str, seed: int, repeats: int) -> None:
    runs = {}
    for name in ("senders", "edges"):
        _, algo, trainer = build_es(config, [f"train.seed={seed}"], seed)
        if name == "edges":
            algo.network.core = batched_core(algo.network.core, algo.network.features)
        runs[name] = (algo, trainer)
    timed = alternate(
        {name: lambda t=trainer: t.step()[0] for name, (_, trainer) in runs.items()}, repeats
    )
    per_steps = {
        name: float(np.median([1000 * seconds / steps for seconds, steps in values]))
        for name, values in timed.items()
    }
    steps = {name: int(np.mean([steps for _, steps in values])) for name, values in timed.items()}
    thetas = [algo.strategy.theta.numpy() for algo, _ in runs.values()]
    report(
        f"{config}: ES generations, s per 1,000 steps (mean steps a generation {steps})",
        per_steps,
        np.abs(thetas[0] - thetas[1]).max(),
    )


def routing_observations(features, count: int) -> tf.Tensor:
    """Observations [count, O] of `features`' topology after 5 steps of fixed actions."""
    env = Routing(count, seed=0, topology=features.topology)
    observ = env.reset(tf.range(count))
    for step in range(5):
        observ, *_ = env.step(tf.fill([count], step % features.num_actions))
    return observ


def forward(topology: str, members: int, repeats: int) -> None:
    features = RoutingGraphFeatures([load_topology(topology)])  # A family of one.
    network = GraphPopulation(features)  # nsfnet_es's sizes: H = 25, R = 20, T = 5.
    baseline = GraphPopulation(features)
    baseline.core = batched_core(network.core, features)
    params = tf.stack([network.init_params(seed) for seed in range(members)])  # [M, D]
    observ = routing_observations(features, members)[:, None]  # [M, 1, O]
    calls = {
        name: tf.function(lambda net=net: net.apply(params, observ), jit_compile=True)
        for name, net in (("senders", network), ("edges", baseline))
    }
    timed = alternate({name: lambda c=c: c().numpy() for name, c in calls.items()}, repeats)
    median, (first, second) = medians(timed)
    report(
        f"{topology} ({features.num_vertices} links, {len(features.graphs[0][1])} message "
        "pairs) as a family of one: "
        f"forward pass of {members} members, s",
        median,
        np.abs(first - second).max(),
    )


def gradient(config: str, batch: int, repeats: int) -> None:
    """One gradient of a PPO-shaped loss on the actor and the critic of `config`'s
    topology and sizes, for `batch` observations, compiled as `config` trains (graph
    mode for the PPO presets)."""
    cfg = load_run_config(config)
    features = RoutingGraphFeatures(cfg.network.topology or list(cfg.env.topologies))
    sizes = dict(
        link_state_size=cfg.network.link_state_size,
        readout_units=cfg.network.readout_units,
        message_passing_steps=cfg.network.message_passing_steps,
    )
    observ = routing_observations(features, batch)
    weight = tf.random.stateless_normal([batch, features.num_actions], seed=[1, 2])
    calls = {}
    for name in ("senders", "edges"):
        actor = GraphNetwork(features, critic=False, seed=0, **sizes)
        critic = GraphNetwork(features, critic=True, seed=1, **sizes)
        if name == "edges":
            actor.core, critic.core = (
                batched_core(actor.core, features),
                batched_core(critic.core, features),
            )
        variables = actor.trainable_variables + critic.trainable_variables

        def step(actor=actor, critic=critic, variables=variables):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(actor(observ) * weight) + tf.reduce_sum(critic(observ) ** 2)
            return tape.gradient(loss, variables)

        calls[name] = tf.function(step, jit_compile=bool(cfg.train.jit_compile))
    timed = alternate(
        {name: lambda c=c: [g.numpy() for g in c()] for name, c in calls.items()}, repeats
    )
    median, grads = medians(timed)
    difference = max(float(np.abs(a - b).max()) for a, b in zip(*grads))
    report(
        f"{config}: a gradient of the actor and critic on {batch} observations "
        f"({'XLA' if cfg.train.jit_compile else 'graph mode'}), s",
        median,
        difference,
    )


def report(what: str, median: dict, difference: float) -> None:
    print(
        f"{what}: senders {median['senders']:.4f}, edges before {median['edges']:.4f}, "
        f"before / senders {median['edges'] / median['senders']:.2f}x; largest difference "
        f"between the two sides' parameters or outputs {difference:.2g}; load "
        f"{harness.load()}",
        flush=True,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--configs", nargs="*", default=["mixed_es"])
    parser.add_argument("--ppo", nargs="*", default=["mixed_ppo"])
    parser.add_argument("--batch", type=int, default=64, help="observations of a gradient")
    parser.add_argument("--topology", default="waxman-100-s0")
    parser.add_argument("--members", type=int, default=64)
    args = parser.parse_args()
    run = harness.Run("graph_aggregation")
    print(f"{run.header}; seed {args.seed}", flush=True)
    for config in args.configs:
        es_generation(config, args.seed, args.repeats)
    for config in args.ppo:
        gradient(config, args.batch, args.repeats)
    if args.topology:
        forward(args.topology, args.members, args.repeats)


if __name__ == "__main__":
    main()
