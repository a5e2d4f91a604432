"""The routing observation as the graph network reads it: the links' graph and their features."""

from __future__ import annotations

import tensorflow as tf

from batchrl.envs.routing.observation import DEMANDS, split_observ
from batchrl.envs.routing.topology import Topology, load_topology


class RoutingGraphFeatures:
    """Turns routing observations [..., (K + 1) L + 3] into graphs of link features.

    A `batchrl.networks.graph.GraphFeatures`, as the routing paper's network reads the
    network: the vertices are the L directed links, the edges the topology's
    `message_pairs` (from link (i, j) to each out-link (j, m) of j, m != i). The actor
    scores K graphs, one per candidate path; the critic one graph of the capacities:

        action_graphs  [..., K, L, 4]  remaining capacity / capacity, and the one-hot of
                                       the demand size (8, 32, 64) on the links of path k,
                                       zero elsewhere
        state_graph    [..., 1, L, 1]  remaining capacity / capacity
    """

    def __init__(self, topology: Topology | str = "nsfnet"):
        """Args:
        topology: a `Topology`, or what `load_topology` loads ('nsfnet', 'geant2', a JSON
          file or a networkx graph): the environment's.
        """
        if not isinstance(topology, Topology):
            topology = load_topology(topology)
        self.topology = topology
        self.name = topology.name
        self.num_vertices = topology.num_links
        self.edges = topology.message_pairs  # [P, 2]
        self.num_features = 1 + len(DEMANDS)
        self.num_actions = topology.k

    def action_graphs(self, observ: tf.Tensor) -> tf.Tensor:
        """The features [..., K, L, 4] of each candidate path's graph."""
        parts = self._split(observ)
        capacity = parts.capacities / self.topology.capacity  # [..., L]
        capacity = tf.broadcast_to(capacity[..., None, :], tf.shape(parts.path_marks))
        onehot = [tf.cast(tf.equal(parts.path_marks, d), tf.float32) for d in DEMANDS]
        return tf.stack([capacity, *onehot], axis=-1)  # [..., K, L, 4]

    def state_graph(self, observ: tf.Tensor) -> tf.Tensor:
        """The features [..., 1, L, 1] of the critic's one graph: the capacities."""
        parts = self._split(observ)
        capacity = parts.capacities / self.topology.capacity  # [..., L]
        return capacity[..., None, :, None]  # [..., 1, L, 1]

    def _split(self, observ):
        topology = self.topology
        size = int(observ.shape[-1])
        expected = (topology.k + 1) * topology.num_links + 3
        if size != expected:
            raise ValueError(
                f"The graph network of {topology.name} ({topology.num_links} links, K = "
                f"{topology.k}) takes observations of size {expected}, not {size}: does "
                "network.topology name the environment's topology?"
            )
        return split_observ(observ, topology.k)
