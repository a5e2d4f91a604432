"""The flat observation vector of the routing environments, and its layout."""

from __future__ import annotations

from typing import NamedTuple

import gymnasium as gym
import numpy as np
import tensorflow as tf

from batchrl.envs.routing.topology import Topology
from batchrl.envs.routing.topology_set import TopologySet

DEMANDS = (8.0, 32.0, 64.0)
MAX_DEMAND = max(DEMANDS)


class RoutingObserv(NamedTuple):
    """An observation split into its parts; `...` is any batch shape."""

    capacities: object  # [..., L] remaining capacity of each link, in demand units
    path_marks: object  # [..., K, L] the demand on the links of candidate path k, else 0
    demand: object  # [...] the demand to route: 8, 32 or 64
    source: object  # [...] its source node, as a float
    destination: object  # [...] its destination node, as a float
    topology: object = None  # [...] a mixed batch's topology index, as a float; else None


def observ_size(num_links: int, k: int, mixed: bool = False) -> int:
    """The length (K + 1) L + 3 of the observation vector; + 1 in a mixed batch."""
    return (k + 1) * num_links + 3 + int(mixed)


def observation_space(topology: Topology | TopologySet) -> gym.spaces.Box:
    """The float32 Box of observations [(K + 1) L + 3] of a topology.

    Layout, with L links and K candidate paths:

        [0, L)                capacities     remaining capacity of each link (0..capacity)
        [L + k L, L + (k+1) L)  path_marks[k]  the demand on the links of path k, else 0
        (K + 1) L             demand         8, 32 or 64
        (K + 1) L + 1         source         node id
        (K + 1) L + 2         destination    node id

    Capacities and demands are in raw units (a graph network divides by the capacity,
    200, and one-hot encodes the demand size); all values are integers, exact in float32.
    `split_observ` undoes the layout.

    A mixed batch (a `TopologySet` of T topologies) pads every network to the largest
    topology's L links (the padded links read capacity 0 and lie on no path) and appends
    the network's topology index in 0..T-1: [(K + 1) L + 4].
    """
    num_links, k = topology.num_links, topology.k
    index = [len(topology) - 1] if isinstance(topology, TopologySet) else []
    high = np.concatenate(
        [
            np.full(num_links, topology.capacity),
            np.full(k * num_links, MAX_DEMAND),
            [MAX_DEMAND, topology.num_nodes - 1, topology.num_nodes - 1],
            index,
        ]
    ).astype(np.float32)
    return gym.spaces.Box(np.zeros_like(high), high, dtype=np.float32)


def split_observ(observ, k: int) -> RoutingObserv:
    """Splits observations [..., (K + 1) L + 3] into their parts.

    Works on NumPy arrays and on TensorFlow tensors (also inside `tf.function`); the
    last dimension must be static. The size tells the layouts apart: (K + 1) L + 3 for
    one topology, (K + 1) L + 4 in a mixed batch (see `observation_space`); as K + 1 >= 2
    divides at most one of size - 3 and size - 4, no size fits both.

    Args:
      observ: observations [..., (K + 1) L + 3] or [..., (K + 1) L + 4].
      k: K, the number of candidate paths.

    Returns:
      The parts, of the same kind as `observ`; see `RoutingObserv`.
    """
    size = int(observ.shape[-1])
    mixed = (size - 3) % (k + 1) != 0
    num_links = (size - 3 - int(mixed)) // (k + 1)
    if num_links < 1 or observ_size(num_links, k, mixed) != size:
        raise ValueError(f"Observations of size {size} do not fit the layout for k = {k}.")
    marks = observ[..., num_links : (k + 1) * num_links]  # [..., K L]
    if isinstance(observ, np.ndarray):
        marks = marks.reshape(observ.shape[:-1] + (k, num_links))
    else:
        marks = tf.reshape(marks, tf.concat([tf.shape(observ)[:-1], [k, num_links]], 0))
    end = (k + 1) * num_links
    return RoutingObserv(
        capacities=observ[..., :num_links],
        path_marks=marks,
        demand=observ[..., end],
        source=observ[..., end + 1],
        destination=observ[..., end + 2],
        topology=observ[..., end + 3] if mixed else None,
    )


def make_observ(
    topology: Topology,
    capacities: np.ndarray,
    demand: float,
    source: int,
    destination: int,
) -> np.ndarray:
    """The observation float32 [(K + 1) L + 3] of one network (NumPy).

    Args:
      topology: the network.
      capacities: the remaining capacity of each link [L].
      demand: the demand to route.
      source: its source node.
      destination: its destination node, != source.
    """
    marks = demand * topology.incidence[source, destination]  # [K, L]
    parts = [capacities, marks.reshape(-1), [demand, source, destination]]
    return np.concatenate(parts).astype(np.float32)
