"""Each candidate path's links as a 0/1 mask: for the environment, heuristics and graph network."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from batchrl.envs.routing.observation import RoutingObserv
from batchrl.envs.routing.topology import Topology
from batchrl.envs.routing.topology_set import TopologySet, make_topology_set

# Masks are looked up in a table of [T, N, N, K, L] while it holds at most this many
# numbers (16 MiB of float32), else built from the paths' links on each call.
MASK_TABLE_LIMIT = 2**22


class PathMasks:
    """The 0/1 link masks [..., K, L] of a pair's K candidate paths, in TensorFlow ops.

    The routing observation holds the state only (capacities, demand, pair); what each
    candidate path would take, the paper's per-path features, is computed from it here
    by whoever reads it: the environment debits the chosen path, the heuristics test
    the paths, and `RoutingGraphFeatures` builds the graph network's input, each inside
    its own XLA program.

    From a table of every path's mask while it holds at most `MASK_TABLE_LIMIT` numbers
    (NSFNET 32,928; GEANT2 170,496), else from the paths' links: they are distinct, so
    the sum of their one-hots is the mask, exactly, and the padding index L one-hots to
    zeros. Both give the same numbers; the table made NSFNET's steps 2.5 to 4 times as
    fast on one core at B = 256 and 4,096 (2026-11-27), as the one-hots cost H times the
    masks.
    """

    def __init__(self, topology: Topology | TopologySet):
        """Args:
        topology: one `Topology`, or the `TopologySet` of a mixed batch (padded to its
          largest topology's L links; the padded links are on no path).
        """
        padded = topology if isinstance(topology, TopologySet) else make_topology_set([topology])
        self.num_links, self.k = padded.num_links, padded.k
        self._path_links = tf.constant(padded.path_links)  # [T, N, N, K, H]
        self.table = None  # [T, N, N, K, L] 0/1, while it is small.
        if padded.path_links[..., 0].size * padded.num_links <= MASK_TABLE_LIMIT:
            table = np.zeros(padded.path_links.shape[:-1] + (padded.num_links + 1,), np.float32)
            np.put_along_axis(table, padded.path_links, 1.0, axis=-1)
            self.table = tf.constant(table[..., :-1])

    def __call__(self, index: tf.Tensor) -> tf.Tensor:
        """The masks of paths: int32 index [..., 3] (topology, source, destination) gives
        every candidate path's [..., K, L]; [..., 4] (..., path) one path's [..., L]."""
        if self.table is not None:
            return tf.gather_nd(self.table, index)
        links = tf.gather_nd(self._path_links, index)  # [..., K, H] or [..., H]
        return tf.reduce_sum(tf.one_hot(links, self.num_links), axis=-2)

    def of(self, parts: RoutingObserv) -> tf.Tensor:
        """The masks [..., K, L] of the candidate paths of observations' demands."""
        pair = tf.cast(tf.stack([parts.source, parts.destination], -1), tf.int32)  # [..., 2]
        if parts.topology is None:
            topology = tf.zeros_like(pair[..., :1])
        else:
            topology = tf.cast(parts.topology, tf.int32)[..., None]
        return self(tf.concat([topology, pair], -1))

    def marks(self, parts: RoutingObserv) -> tf.Tensor:
        """The demand on each candidate path's links, else 0 [..., K, L]."""
        return self.of(parts) * parts.demand[..., None, None]
