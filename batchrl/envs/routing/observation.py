"""The flat observation vector of the routing environments, and its layout."""

from __future__ import annotations

from typing import NamedTuple

import gymnasium as gym
import numpy as np

from batchrl.envs.routing.topology import Topology
from batchrl.envs.routing.topology_set import TopologySet

DEMANDS = (8.0, 32.0, 64.0)
MAX_DEMAND = max(DEMANDS)


class RoutingObserv(NamedTuple):
    """An observation split into its parts; `...` is any batch shape."""

    capacities: object  # [..., L] remaining capacity of each link, in demand units
    demand: object  # [...] the demand to route: 8, 32 or 64
    source: object  # [...] its source node, as a float
    destination: object  # [...] its destination node, as a float
    topology: object = None  # [...] a mixed batch's topology index, as a float; else None


def observ_size(num_links: int, mixed: bool = False) -> int:
    """The length L + 3 of the observation vector; + 1 in a mixed batch."""
    return num_links + 3 + int(mixed)


def observation_space(topology: Topology | TopologySet) -> gym.spaces.Box:
    """The float32 Box of observations [L + 3] of a topology.

    Layout, with L links:

        [0, L)   capacities   remaining capacity of each link (0..capacity)
        L        demand       8, 32 or 64
        L + 1    source       node id
        L + 2    destination  node id

    The observation is the state, as the reference environment's is: which links each
    of the pair's K candidate paths takes, and so what the demand would take from them
    (the paper's per-path features), is the topology's, and `PathMasks` computes it
    inside whatever reads the observation (`RoutingGraphFeatures`, the heuristics).
    Until 2026-11-27 the observation also held the demand on each candidate path's
    links, [(K + 1) L + 3], which made every step write K L more numbers (the gain from
    dropping them is in docs/benchmarks.md).

    Capacities and demands are in raw units (a graph network divides by the capacity,
    200, and one-hot encodes the demand size); all values are integers, exact in float32.
    `split_observ` undoes the layout.

    A mixed batch (a `TopologySet` of T topologies) pads every network to the largest
    topology's L links (the padded links read capacity 0 and lie on no path) and appends
    the network's topology index in 0..T-1: [L + 4].
    """
    index = [len(topology) - 1] if isinstance(topology, TopologySet) else []
    high = np.concatenate(
        [
            np.full(topology.num_links, topology.capacity),
            [MAX_DEMAND, topology.num_nodes - 1, topology.num_nodes - 1],
            index,
        ]
    ).astype(np.float32)
    return gym.spaces.Box(np.zeros_like(high), high, dtype=np.float32)


def split_observ(observ, num_links: int) -> RoutingObserv:
    """Splits observations [..., L + 3] (one topology) or [..., L + 4] (mixed) into parts.

    Works on NumPy arrays and on TensorFlow tensors (also inside `tf.function`); the
    last dimension must be static.

    Args:
      observ: observations [..., L + 3] or [..., L + 4] (see `observation_space`).
      num_links: L, the links of the topology (of the largest, in a mixed batch).

    Returns:
      The parts, of the same kind as `observ`; see `RoutingObserv`.

    Raises:
      ValueError: the size is neither L + 3 nor L + 4.
    """
    size = int(observ.shape[-1])
    if size not in (observ_size(num_links), observ_size(num_links, mixed=True)):
        raise ValueError(
            f"Observations of size {size} do not fit a routing layout of {num_links} links: "
            f"{observ_size(num_links)} for one topology, {observ_size(num_links, True)} "
            "for a mixed batch."
        )
    end = num_links
    return RoutingObserv(
        capacities=observ[..., :num_links],
        demand=observ[..., end],
        source=observ[..., end + 1],
        destination=observ[..., end + 2],
        topology=observ[..., end + 3] if size == observ_size(num_links, True) else None,
    )


def make_observ(capacities: np.ndarray, demand: float, source: int, destination: int) -> np.ndarray:
    """The observation float32 [L + 3] of one network (NumPy).

    Args:
      capacities: the remaining capacity of each link [L].
      demand: the demand to route.
      source: its source node.
      destination: its destination node, != source.
    """
    return np.concatenate([capacities, [demand, source, destination]]).astype(np.float32)
