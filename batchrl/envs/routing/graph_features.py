"""The routing observation as the graph network reads it: the links' graph and their features."""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from batchrl.envs.routing.observation import DEMANDS, observ_size, split_observ
from batchrl.envs.routing.path_masks import PathMasks
from batchrl.envs.routing.topology import Topology
from batchrl.envs.routing.topology_set import TopologySet, resolve_topology


class RoutingGraphFeatures:
    """Turns routing observations [..., L + 3] into graphs of link features.

    A `batchrl.networks.graph.GraphFeatures`, as the routing paper's network reads the
    network: the vertices are the L directed links, the edges the topology's
    `message_pairs` (from link (i, j) to each out-link (j, m) of j, m != i). The actor
    scores K graphs, one per candidate path; the critic one graph of the capacities:

        action_graphs  [..., K, L, 4]  remaining capacity / capacity, and the one-hot of
                                       the demand size (8, 32, 64) on the links of path k,
                                       zero elsewhere
        state_graph    [..., 1, L, 1]  remaining capacity / capacity
        action_vertices [..., K, L]    1 on the links of path k (a path readout's)

    The observation holds the state only; the links of the pair's K candidate paths come
    from the topology (`PathMasks`), inside the network's program, as the paper's agent
    marks each path itself.

    Built on a list of topologies (a mixed batch's, `Routing(topology=[...])`), it is a
    family of T graphs: `graphs` holds each topology's (links, message pairs), the
    features are padded to the largest topology's L links (the padded links read zeros,
    and the network ignores them), and `graph_index` reads each observation's topology.
    """

    def __init__(self, topology: Topology | TopologySet | str | Sequence = "nsfnet"):
        """Args:
        topology: a `Topology`, or what `load_topology` loads ('nsfnet', 'geant2', a JSON
          file or a networkx graph): the environment's; or a list of them, or a
          `TopologySet`, for a mixed batch.
        """
        topology = resolve_topology(topology)
        self.topology = topology
        self.name = topology.name
        self.num_vertices = topology.num_links
        self.num_features = 1 + len(DEMANDS)
        self.num_actions = topology.k
        self.mixed = isinstance(topology, TopologySet)
        self.path_masks = PathMasks(topology)
        if self.mixed:
            self.edges = None
            self.graphs = tuple((t.num_links, t.message_pairs) for t in topology.topologies)
            self._capacities = tf.constant(topology.capacities)  # [T]
        else:
            self.edges = topology.message_pairs  # [P, 2]

    def action_graphs(self, observ: tf.Tensor) -> tf.Tensor:
        """The features [..., K, L, 4] of each candidate path's graph."""
        parts = self._split(observ)
        masks = self.path_masks.of(parts)  # [..., K, L]
        capacity = parts.capacities / self._capacity(parts)  # [..., L]
        capacity = tf.broadcast_to(capacity[..., None, :], tf.shape(masks))
        size = tf.cast(tf.equal(parts.demand[..., None], DEMANDS), tf.float32)  # [..., 3]
        onehot = masks[..., None] * size[..., None, None, :]  # [..., K, L, 3]
        return tf.concat([capacity[..., None], onehot], axis=-1)  # [..., K, L, 4]

    def action_vertices(self, observ: tf.Tensor) -> tf.Tensor:
        """1 on the links of each candidate path, else 0: [..., K, L] (a path readout's)."""
        return self.path_masks.of(self._split(observ))  # [..., K, L]

    def state_graph(self, observ: tf.Tensor) -> tf.Tensor:
        """The features [..., 1, L, 1] of the critic's one graph: the capacities."""
        parts = self._split(observ)
        capacity = parts.capacities / self._capacity(parts)  # [..., L]
        return capacity[..., None, :, None]  # [..., 1, L, 1]

    def graph_index(self, observ: tf.Tensor) -> tf.Tensor:
        """Each observation's topology int32 [...] (mixed batches; 0 for one topology)."""
        parts = self._split(observ)
        if not self.mixed:
            return tf.zeros(tf.shape(parts.demand), tf.int32)
        return tf.cast(parts.topology, tf.int32)

    def _capacity(self, parts):
        """The link capacity [..., 1] of each observation's topology (a scalar for one)."""
        if not self.mixed:
            return self.topology.capacity
        return tf.gather(self._capacities, tf.cast(parts.topology, tf.int32))[..., None]

    def _split(self, observ):
        topology = self.topology
        size = int(observ.shape[-1])
        expected = observ_size(topology.num_links, self.mixed)
        if size != expected:
            raise ValueError(
                f"The graph network of {topology.name} ({topology.num_links} links, K = "
                f"{topology.k}) takes observations of size {expected}, not {size}: does "
                "network.topology (or env.topologies) name the environment's topologies?"
            )
        return split_observ(observ, topology.num_links)
