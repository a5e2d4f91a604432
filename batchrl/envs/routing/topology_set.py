"""Several topologies padded to one shape, so that one batch can hold networks of each."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from batchrl.envs.routing.topology import Topology, load_topology


@dataclasses.dataclass(frozen=True, eq=False)
class TopologySet:
    """T topologies padded to the largest: the arrays a mixed batch gathers from.

    Why padding: a batch of networks is a set of tensors of one shape, [B, L] capacities
    and the paths' masks [B, K, L] (`PathMasks`), so that one XLA program steps them
    all. Ragged tensors would save the padded links of the smaller topologies, but XLA
    compiles no ragged ops, and the graph network would have to batch graphs of
    different sizes anyway. So every topology gets the largest one's N nodes and L
    links: topology t's nodes are 0..N_t - 1 and its links 0..L_t - 1, as in its own
    `Topology`; the links L_t..L - 1 have capacity 0 and lie on no path, so they never
    limit a path (0 >= 0) and read zeros in every observation. NSFNET (42 links) padded
    to GEANT2's 74 costs the NSFNET networks of a mixed batch 32 links of work each.

    Attributes:
      topologies: the T topologies, in order; their index is the topology index of an
        observation.
      name: their names joined by '+'.
      num_nodes: N, the most nodes.
      num_links: L, the most links.
      k: K, the candidate paths per pair (the same for all).
      capacity: the largest link capacity (the bound of the observation space).
      capacities: float32 [T], each topology's link capacity.
      node_counts: int32 [T], N_t.
      link_counts: int32 [T], L_t.
      link_mask: float32 [T, L], 1 on topology t's links.
      path_links: int32 [T, N, N, K, H], each topology's `path_links` padded with L (no
        link), H the most hops of any path.
    """

    topologies: tuple
    name: str
    num_nodes: int
    num_links: int
    k: int
    capacity: float
    capacities: np.ndarray
    node_counts: np.ndarray
    link_counts: np.ndarray
    link_mask: np.ndarray
    path_links: np.ndarray

    def __len__(self) -> int:
        return len(self.topologies)


def make_topology_set(topologies: Sequence[str | Topology]) -> TopologySet:
    """Loads the topologies (what `load_topology` loads, or `Topology`s) and pads them.

    Raises:
      ValueError: the list is empty, a topology does not load, or their K differ.
    """
    if isinstance(topologies, str | Topology) or not len(topologies):
        raise ValueError(
            f"A topology set needs a non-empty list of topologies, got {topologies!r}."
        )
    loaded = tuple(t if isinstance(t, Topology) else load_topology(t) for t in topologies)
    ks = {t.k for t in loaded}
    if len(ks) > 1:
        raise ValueError(f"The topologies have different K ({sorted(ks)}); one batch needs one K.")
    nodes = max(t.num_nodes for t in loaded)
    links = max(t.num_links for t in loaded)
    hops = max(t.path_links.shape[-1] for t in loaded)
    k = loaded[0].k
    path_links = np.full([len(loaded), nodes, nodes, k, hops], links, np.int32)
    link_mask = np.zeros([len(loaded), links], np.float32)
    for i, topology in enumerate(loaded):
        n, own = topology.num_nodes, topology.path_links
        # Topology i's padding value is its own L_i; the set's is L.
        path_links[i, :n, :n, :, : own.shape[-1]] = np.where(own == topology.num_links, links, own)
        link_mask[i, : topology.num_links] = 1.0
    return TopologySet(
        topologies=loaded,
        name="+".join(t.name for t in loaded),
        num_nodes=nodes,
        num_links=links,
        k=k,
        capacity=max(t.capacity for t in loaded),
        capacities=np.array([t.capacity for t in loaded], np.float32),
        node_counts=np.array([t.num_nodes for t in loaded], np.int32),
        link_counts=np.array([t.num_links for t in loaded], np.int32),
        link_mask=link_mask,
        path_links=path_links,
    )


def resolve_topology(topology) -> Topology | TopologySet:
    """A `Topology`, or the `TopologySet` of a list of them (a mixed batch): takes what
    `load_topology` loads, a `Topology`, a list or tuple of either, or a `TopologySet`."""
    if isinstance(topology, list | tuple):
        return make_topology_set(topology)
    if isinstance(topology, Topology | TopologySet):
        return topology
    return load_topology(topology)
