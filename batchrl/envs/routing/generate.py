"""Generated topologies: Waxman graphs of any size, connected, with bounded degrees."""

from __future__ import annotations

import re

import numpy as np

# A generated topology's name, as configs and `load_topology` take it: waxman-<N>-s<seed>.
WAXMAN_NAME = re.compile(r"waxman-(\d+)-s(\d+)")
MIN_NODES = 5
MAX_NODES = 1000
MIN_DEGREE = 2


def waxman_edges(
    num_nodes: int,
    seed: int,
    mean_degree: float = 3.0,
    max_degree: int = 6,
    alpha: float = 0.2,
    attempt: int = 0,
) -> list[tuple[int, int]]:
    """The undirected links [u, v] (u < v) of a Waxman graph, made connected.

    Nodes are uniform points in the unit square; nodes u and v are linked with
    probability min(1, beta exp(-d(u, v) / (alpha sqrt 2))), beta chosen so that the
    expected mean degree is `mean_degree` (the shipped topologies: NSFNET 3.0, GEANT2
    3.1). Links are then added in random order, skipping those at a node that already
    has `max_degree`. Last, nodes are given a second link (MIN_DEGREE) and components
    are joined, each by the shortest link allowed, so that the result is connected and
    every degree lies in [MIN_DEGREE, max_degree]. NumPy only: the environment does not
    depend on networkx (the tests check the promises with it).

    Args:
      num_nodes: N, in [MIN_NODES, MAX_NODES].
      seed: the seed of the points and the draws.
      mean_degree: the expected mean degree before repairs.
      max_degree: the most links at a node (>= 3).
      alpha: Waxman's alpha: larger gives more long links.
      attempt: draws another graph of the same seed (`load_topology` takes the first
        attempt whose every pair has K candidate paths).

    Returns:
      Sorted undirected links (u, v), u < v, nodes 0..N-1.
    """
    if not MIN_NODES <= num_nodes <= MAX_NODES:
        raise ValueError(f"num_nodes={num_nodes}; valid values are {MIN_NODES}..{MAX_NODES}.")
    if max_degree < 3:
        raise ValueError(f"max_degree={max_degree}; valid values are >= 3.")
    rng = np.random.default_rng([int(seed), int(num_nodes), int(attempt)])
    points = rng.random((num_nodes, 2))  # [N, 2]
    distance = np.linalg.norm(points[:, None] - points[None], axis=-1)  # [N, N]
    upper = np.triu_indices(num_nodes, 1)
    weight = np.exp(-distance[upper] / (alpha * np.sqrt(2.0)))  # [N (N - 1) / 2]
    beta = mean_degree * num_nodes / 2 / weight.sum()
    accepted = rng.random(weight.shape) < np.minimum(1.0, beta * weight)
    degree = np.zeros(num_nodes, np.int64)
    edges = set()
    for i in rng.permutation(np.flatnonzero(accepted)):
        u, v = int(upper[0][i]), int(upper[1][i])
        if degree[u] < max_degree and degree[v] < max_degree:
            edges.add((u, v))
            degree[u] += 1
            degree[v] += 1

    def add_shortest(sources, allowed_targets):
        """Adds the shortest allowed link from a node of `sources` to one of the targets."""
        best = None
        for u in sources:
            for v in np.argsort(distance[u]):
                v = int(v)
                if v == u or not allowed_targets[v] or (min(u, v), max(u, v)) in edges:
                    continue
                if degree[v] >= max_degree:
                    continue
                if best is None or distance[u, v] < distance[best]:
                    best = (u, v)
                break
        if best is None:
            raise ValueError(f"Cannot add a link within max_degree={max_degree}.")
        u, v = best
        edges.add((min(u, v), max(u, v)))
        degree[u] += 1
        degree[v] += 1

    everyone = np.ones(num_nodes, bool)
    for u in range(num_nodes):
        while degree[u] < MIN_DEGREE:
            add_shortest([u], everyone)
    while True:
        component = _component_of(0, num_nodes, edges)
        if len(component) == num_nodes:
            break
        inside = np.zeros(num_nodes, bool)
        inside[list(component)] = True
        free = [u for u in component if degree[u] < max_degree]
        add_shortest(free, ~inside)
    return sorted(edges)


def _component_of(node: int, num_nodes: int, edges) -> set:
    """The nodes connected to `node` by `edges` (undirected)."""
    neighbours = [[] for _ in range(num_nodes)]
    for u, v in edges:
        neighbours[u].append(v)
        neighbours[v].append(u)
    seen, stack = {node}, [node]
    while stack:
        for v in neighbours[stack.pop()]:
            if v not in seen:
                seen.add(v)
                stack.append(v)
    return seen


def parse_generated(name: str) -> tuple[int, int] | None:
    """(N, seed) of a generated topology's name 'waxman-<N>-s<seed>', else None."""
    match = WAXMAN_NAME.fullmatch(str(name).lower())
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))
