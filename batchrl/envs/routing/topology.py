"""Optical network topologies: directed links and the K candidate paths of every pair."""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import os
from collections.abc import Iterator, Sequence
from importlib import resources

import numpy as np

from batchrl.envs.routing.generate import MAX_NODES, MIN_NODES, parse_generated, waxman_edges

SHIPPED = ("nsfnet", "geant2")
GENERATED = "waxman-<N>-s<seed>"
ATTEMPTS = 10  # Graphs drawn for a generated name before giving up.
CAPACITY = 200.0
K = 4


@dataclasses.dataclass(frozen=True, eq=False)
class Topology:
    """A network of directed links and K fixed candidate paths for every ordered pair.

    Build one with `load_topology`. Links are directed: u->v and v->u are two links with
    capacities of their own. The link order is the reference code's: nodes in order of
    first appearance in the list of directed links, and for each node its out-links in
    list order. The candidate paths of (s, t) are the first K simple paths from s to t of
    at most 2 * diameter hops, sorted by (hops, node list): fewest hops first, ties by
    the node sequence.

    Attributes:
      name: e.g. 'NSFNET'.
      num_nodes: N; nodes are 0..N-1.
      links: int32 [L, 2], (tail, head) of each directed link in link order.
      capacity: the capacity of every link.
      k: K, the number of candidate paths per pair.
      paths: {(s, t): K tuples of nodes}, for every s != t.
      path_links: int32 [N, N, K, H], the links of the k-th path from s to t in order,
        padded with L (no link) to H, the most hops of any path; the fixed-size form of
        `paths` that batches of networks gather from (all L for s = t).
      hops: int32 [N, N, K], the number of links of each path (zero for s = t).
      message_pairs: int32 [M, 2], (first, second) for every link first = (i, j) and every
        out-link second = (j, m) of j with m != i: the upstream links a graph network
        passes messages from (no U-turns). M = 88 for NSFNET and 202 for GEANT2.
      node_names: the label of each node in the source (str of the id for JSON files).
    """

    name: str
    num_nodes: int
    links: np.ndarray
    capacity: float
    k: int
    paths: dict
    path_links: np.ndarray
    hops: np.ndarray
    message_pairs: np.ndarray
    node_names: tuple

    @property
    def num_links(self) -> int:
        return len(self.links)

    @functools.cached_property
    def incidence(self) -> np.ndarray:
        """float32 [N, N, K, L], 1 on the links of the k-th path from s to t (zero for
        s = t): `path_links` as a dense mask, N^2 K L floats (64 MB at 100 nodes and 400
        links), so built only when asked for (the NumPy `RoutingEnv` reads it)."""
        n, k, links = self.num_nodes, self.k, self.num_links
        dense = np.zeros([n, n, k, links + 1], np.float32)  # Column L takes the padding.
        index = np.indices(self.path_links.shape[:3])
        dense[(*index[..., None], self.path_links)] = 1.0
        return dense[..., :links]


def load_topology(source="nsfnet", k: int = K) -> Topology:
    """Loads a shipped topology, a JSON file of the same format, a generated one, or a
    networkx graph.

    A generated topology is named 'waxman-<N>-s<seed>': the Waxman graph of N nodes
    that `generate.waxman_edges` draws from the seed (connected, degrees 2 to 6), every
    link of capacity 200; if some pair has fewer than k candidate paths, the next
    attempt of the same seed is drawn, up to ATTEMPTS.

    A JSON file holds `nodes` (the number N), and either `directed_edges` (every directed
    link, as [u, v] lists) or `edges` (undirected [u, v] lists, each giving the links
    u->v and v->u), with nodes numbered 0..N-1. Optional keys: `name`, `capacity`
    (default 200) and `env_link_index_order` (the link order, as in the shipped files).
    A networkx graph (directed or not; networkx itself is not imported) gives its links in
    the order `for i in graph: for j in graph[i]`, the reference code's order; nodes that
    are the integers 0..N-1 keep their numbers, other nodes are numbered in `list(graph)`
    order; every link gets the capacity 200.

    Args:
      source: 'nsfnet' or 'geant2', a path to a JSON file, 'waxman-<N>-s<seed>', or a
        networkx graph.
      k: the number of candidate paths per ordered pair.

    Returns:
      The topology with its candidate paths.

    Raises:
      ValueError: the source is none of these, malformed, not strongly connected, or
        some pair has fewer than k simple paths of at most 2 * diameter hops.
    """
    if not isinstance(source, str | os.PathLike):
        return _from_graph(source, k)
    generated = parse_generated(str(source))
    if generated is not None:
        return _generate(str(source).lower(), *generated, k)
    if str(source).lower() in SHIPPED:
        files = resources.files("batchrl.envs.routing") / "topologies"
        text = (files / f"{str(source).lower()}.json").read_text()
    else:
        check_topology_source(source)  # A clear message for a name that is nothing.
        with open(source) as file:
            text = file.read()
    data = json.loads(text)
    num_nodes = int(data["nodes"])
    if "env_link_index_order" in data:
        links = data["env_link_index_order"]
    else:
        if "directed_edges" in data:
            directed = data["directed_edges"]
        else:
            directed = [edge for u, v in data["edges"] for edge in ([u, v], [v, u])]
        links = reference_link_order(directed)
    names = tuple(str(node) for node in range(num_nodes))
    name = data.get("name", os.path.splitext(os.path.basename(str(source)))[0])
    return make_topology(num_nodes, links, float(data.get("capacity", CAPACITY)), k, name, names)


def check_topology_source(source: str) -> None:
    """Raises ValueError, naming `source` and the valid sources, unless `load_topology`
    can read it: a shipped name, an existing file, or a generated name with N in
    MIN_NODES..MAX_NODES. Computes no paths."""
    name = str(source).lower()
    generated = parse_generated(name)
    if name in SHIPPED or os.path.isfile(source):
        return
    if generated is not None and MIN_NODES <= generated[0] <= MAX_NODES:
        return
    raise ValueError(
        f"{source!r} is not a topology; valid topologies are {list(SHIPPED)}, the path of "
        f"an existing topology JSON file, or a generated {GENERATED!r} with N in "
        f"{MIN_NODES}..{MAX_NODES} (e.g. 'waxman-100-s0')."
    )


def _generate(name: str, num_nodes: int, seed: int, k: int) -> Topology:
    """The generated topology `name` (see `load_topology`)."""
    if not MIN_NODES <= num_nodes <= MAX_NODES:
        raise ValueError(f"{name!r}: N = {num_nodes}; valid values are {MIN_NODES}..{MAX_NODES}.")
    error = None
    for attempt in range(ATTEMPTS):
        try:
            edges = waxman_edges(num_nodes, seed, attempt=attempt)
            links = reference_link_order([edge for u, v in edges for edge in ([u, v], [v, u])])
            return make_topology(num_nodes, links, CAPACITY, k, name)
        except ValueError as failure:
            error = failure
    raise ValueError(f"{name!r}: no attempt of {ATTEMPTS} had k = {k} paths per pair: {error}")


def reference_link_order(directed_edges: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
    """Orders links as the reference code's MultiDiGraph iterates them.

    Nodes come in order of first appearance (tail, then head, of each link in turn); each
    node's out-links keep their order in `directed_edges`.
    """
    successors = collections.defaultdict(list)
    for u, v in directed_edges:
        successors[int(u)].append(int(v))
        successors[int(v)]  # Inserts the head too.
    return [(u, v) for u, heads in successors.items() for v in heads]


def make_topology(
    num_nodes: int,
    links: Sequence[Sequence[int]],
    capacity: float = CAPACITY,
    k: int = K,
    name: str = "",
    node_names: Sequence[str] | None = None,
) -> Topology:
    """Builds a topology from directed links in link order; computes its candidate paths.

    Raises:
      ValueError: see `load_topology`.
    """
    links = np.array(links, np.int32).reshape(-1, 2)  # [L, 2]
    edges = [tuple(int(node) for node in link) for link in links]
    if len(set(edges)) != len(edges):
        raise ValueError(f"Topology {name!r} lists a link twice.")
    if links.size and (links.min() < 0 or links.max() >= num_nodes):
        raise ValueError(f"Topology {name!r} has links outside nodes 0..{num_nodes - 1}.")
    if any(u == v for u, v in edges):
        raise ValueError(f"Topology {name!r} has a link from a node to itself.")
    if k < 1:
        raise ValueError(f"k must be positive, got {k}.")
    successors = [sorted(v for u, v in edges if u == node) for node in range(num_nodes)]
    distances = np.array([_distances_from(successors, node) for node in range(num_nodes)])
    if (distances < 0).any():
        raise ValueError(f"Topology {name!r} is not strongly connected.")
    cutoff = 2 * int(distances.max())
    link_index = {edge: i for i, edge in enumerate(edges)}
    paths = {}
    for s in range(num_nodes):
        for t in range(num_nodes):
            if s == t:
                continue
            found = candidate_paths(successors, distances[:, t], s, t, k, cutoff)
            if len(found) < k:
                raise ValueError(
                    f"Topology {name!r} has {len(found)} simple paths of at most {cutoff} hops "
                    f"from {s} to {t}, fewer than k = {k}; pass a smaller k."
                )
            paths[(s, t)] = tuple(found)
    most_hops = max((len(path) - 1 for found in paths.values() for path in found), default=1)
    path_links = np.full([num_nodes, num_nodes, k, most_hops], len(edges), np.int32)
    hops = np.zeros([num_nodes, num_nodes, k], np.int32)
    for (s, t), found in paths.items():
        for i, path in enumerate(found):
            hops[s, t, i] = len(path) - 1
            path_links[s, t, i, : len(path) - 1] = [link_index[e] for e in zip(path, path[1:])]
    message_pairs = [
        (link_index[(i, j)], link_index[(j, m)]) for i, j in edges for m in successors[j] if m != i
    ]
    return Topology(
        name=name,
        num_nodes=num_nodes,
        links=links,
        capacity=float(capacity),
        k=k,
        paths=paths,
        path_links=path_links,
        hops=hops,
        message_pairs=np.array(message_pairs, np.int32).reshape(-1, 2),
        node_names=tuple(node_names or (str(node) for node in range(num_nodes))),
    )


def candidate_paths(
    successors: Sequence[Sequence[int]],
    distance_to_target: Sequence[int],
    source: int,
    target: int,
    k: int,
    cutoff: int,
) -> list[tuple[int, ...]]:
    """The first k simple paths from source to target by (hops, node list), of <= cutoff hops.

    Equal to sorting `networkx.all_simple_paths(graph, source, target, cutoff)` by
    `(len(path), path)` and keeping k, without listing the long paths: paths are listed
    one hop count at a time, each in lexicographic order, until there are k.

    Args:
      successors: the sorted heads of each node's out-links.
      distance_to_target: the fewest hops from each node to `target`.
      source: the first node.
      target: the last node.
      k: how many paths to keep.
      cutoff: the most hops a path may have.
    """
    paths = []
    for length in range(1, cutoff + 1):
        paths.extend(_simple_paths(successors, distance_to_target, [source], target, length))
        if len(paths) >= k:
            break
    return paths[:k]


def _simple_paths(successors, distance_to_target, path, target, length) -> Iterator[tuple]:
    """The simple paths of `length` hops from `path` to `target`, in lexicographic order."""
    left = length - (len(path) - 1)
    if path[-1] == target:
        if left == 0:
            yield tuple(path)
        return
    for node in successors[path[-1]]:
        if node not in path and distance_to_target[node] <= left - 1:
            yield from _simple_paths(successors, distance_to_target, path + [node], target, length)


def _distances_from(successors, source) -> list[int]:
    """Fewest hops from `source` to every node by breadth-first search; -1 if unreachable."""
    distances = [-1] * len(successors)
    distances[source] = 0
    queue = collections.deque([source])
    while queue:
        node = queue.popleft()
        for head in successors[node]:
            if distances[head] < 0:
                distances[head] = distances[node] + 1
                queue.append(head)
    return distances


def _from_graph(graph, k: int) -> Topology:
    """A topology from a networkx graph (any object iterating nodes, with graph[i] neighbours)."""
    try:
        nodes = list(graph)
        # Nodes 0..N-1 keep their numbers; other labels are numbered in iteration order.
        if sorted(nodes, key=str) == sorted(range(len(nodes)), key=str):
            index = {node: node for node in nodes}
        else:
            index = {node: i for i, node in enumerate(nodes)}
        links = [(index[i], index[j]) for i in nodes for j in graph[i]]
    except (TypeError, KeyError) as error:
        raise ValueError(
            f"Cannot read a topology from {graph!r}: {error}; valid sources are "
            f"{list(SHIPPED)}, a JSON file or a networkx graph."
        ) from None
    name = str(getattr(graph, "name", "") or "graph")
    names = [str(node) for node in sorted(nodes, key=index.get)]
    return make_topology(len(nodes), links, CAPACITY, k, name, names)
