"""Generated topologies: the promises of the Waxman generator, and a 100-node network."""

import networkx as nx
import numpy as np
import pytest
import tensorflow as tf

from batchrl.envs.routing import Routing, load_topology
from batchrl.envs.routing.generate import MIN_DEGREE, waxman_edges
from batchrl.envs.routing.heuristics import Heuristic
from batchrl.envs.routing.topology import check_topology_source
from batchrl.tools.episodes import EpisodeRecorder, first_episodes


def as_graph(topology):
    graph = nx.DiGraph()
    graph.add_nodes_from(range(topology.num_nodes))
    graph.add_edges_from(topology.links.tolist())
    return graph


@pytest.mark.parametrize("name", ["waxman-10-s0", "waxman-30-s1", "waxman-50-s2", "waxman-100-s0"])
def test_generated_topologies_keep_their_promises(name):
    """Connected; every link in both directions; degrees in [2, 6]; every pair's K
    candidate paths are distinct simple paths from s to t along links, fewest hops first,
    and none is longer than 2 * diameter."""
    topology = load_topology(name)
    graph = as_graph(topology)
    undirected = graph.to_undirected(reciprocal=True)
    assert nx.is_connected(undirected)
    assert undirected.number_of_edges() * 2 == topology.num_links  # Links come in pairs.
    degrees = [d for _, d in undirected.degree()]
    assert MIN_DEGREE <= min(degrees) and max(degrees) <= 6
    diameter = nx.diameter(graph)
    assert topology.hops[..., 0].max() == diameter
    assert len(topology.paths) == topology.num_nodes * (topology.num_nodes - 1)
    for (s, t), paths in topology.paths.items():
        assert len(set(paths)) == topology.k
        assert [len(p) - 1 for p in paths] == sorted(len(p) - 1 for p in paths)
        assert len(paths[0]) - 1 == nx.shortest_path_length(graph, s, t)
        for path in paths:
            assert path[0] == s and path[-1] == t and len(set(path)) == len(path)
            assert all(graph.has_edge(u, v) for u, v in zip(path, path[1:]))
            assert len(path) - 1 <= 2 * diameter
    # The fixed-size form the batches gather from holds the same links.
    links = {tuple(link): i for i, link in enumerate(topology.links.tolist())}
    s, t = 0, topology.num_nodes - 1
    for k, path in enumerate(topology.paths[(s, t)]):
        expected = [links[edge] for edge in zip(path, path[1:])]
        row = topology.path_links[s, t, k]
        assert row[: len(expected)].tolist() == expected
        assert (row[len(expected) :] == topology.num_links).all()


def test_candidate_paths_of_a_generated_topology_are_networkx_s():
    """On a small generated topology, the K paths are networkx's all_simple_paths of at
    most 2 * diameter hops, sorted by (hops, nodes): the reference code's definition."""
    topology = load_topology("waxman-10-s0")
    graph = as_graph(topology)
    cutoff = 2 * nx.diameter(graph)
    for (s, t), paths in topology.paths.items():
        every = sorted(nx.all_simple_paths(graph, s, t, cutoff=cutoff), key=lambda p: (len(p), p))
        assert list(paths) == [tuple(p) for p in every[: topology.k]]


def test_generation_is_deterministic_and_seeded():
    assert waxman_edges(40, 7) == waxman_edges(40, 7)
    assert waxman_edges(40, 7) != waxman_edges(40, 8)
    np.testing.assert_array_equal(
        load_topology("waxman-40-s7").links, load_topology("Waxman-40-s7").links
    )


def test_unknown_topologies_are_named_with_the_valid_ones():
    for good in ("nsfnet", "GEANT2", "waxman-100-s3"):
        check_topology_source(good)
    for bad in ("atlantis", "waxman-3-s0", "waxman-100", "nowhere.json"):
        with pytest.raises(ValueError, match=f"'{bad}' is not a topology; valid topologies"):
            check_topology_source(bad)


def test_a_100_node_network_builds_and_steps_with_sap():
    """waxman-100-s0: the work of building it is N (N - 1) K paths of at most H hops
    (no dense N^2 K L tensor: the batch gathers [N, N, K, H] link indices); a batch of 8
    networks runs its first episodes under SAP, every step carrying traffic until a
    demand finds no room."""
    topology = load_topology("waxman-100-s0")
    assert topology.num_nodes == 100
    assert topology.path_links.shape == (100, 100, 4, topology.path_links.shape[-1])
    assert topology.path_links.shape[-1] <= 2 * topology.hops[..., 0].max()
    assert sum(len(paths) for paths in topology.paths.values()) == 100 * 99 * 4
    env = Routing(8, seed=0, topology=topology)
    assert env.observation_space.shape == (topology.num_links + 3,)
    sap = Heuristic("sap", topology)
    recorder = EpisodeRecorder(sap, len(env))
    returns, lengths = first_episodes(env, recorder, max_steps=2000)
    returns, lengths = returns.numpy(), lengths.numpy()
    assert (lengths > 50).all() and (lengths < 2000).all()
    assert (returns > 0.125 * (lengths - 1) - 1e-6).all()  # Each accepted step earns >= 1/8.
    assert env.capacities.numpy().min() >= 0.0
    assert tf.reduce_all(env.topology_index == 0)
