"""Links, link order and candidate paths of the topologies, against REFERENCE.md's facts."""

import collections
import json
from importlib import resources

import numpy as np
import pytest

from batchrl.envs.routing import load_topology, make_topology
from batchrl.envs.routing.topology import reference_link_order

# REFERENCE.md, section 1: hop counts of the kept paths over all ordered pairs.
HOP_HISTOGRAMS = {
    "nsfnet": {1: 42, 2: 88, 3: 174, 4: 280, 5: 136, 6: 8},
    "geant2": {1: 74, 2: 202, 3: 500, 4: 748, 5: 502, 6: 170, 7: 12},
}
SIZES = {"nsfnet": (14, 21, 88), "geant2": (24, 37, 202)}  # nodes, undirected links, pairs


@pytest.fixture(scope="module", params=["nsfnet", "geant2"])
def named(request):
    return request.param, load_topology(request.param)


def shipped_json(name):
    return json.loads(
        (resources.files("batchrl.envs.routing") / "topologies" / f"{name}.json").read_text()
    )


def all_simple_paths_sorted(topology, source, target):
    """The literal definition: every simple path of <= 2 * diameter hops, sorted."""
    successors = collections.defaultdict(list)
    for u, v in topology.links.tolist():
        successors[u].append(v)
    cutoff = 2 * int(topology.hops[..., 0].max())  # Path 0 is a shortest path.
    found, stack = [], [[source]]
    while stack:
        path = stack.pop()
        if path[-1] == target:
            found.append(tuple(path))
            continue
        if len(path) - 1 < cutoff:
            stack.extend(path + [node] for node in successors[path[-1]] if node not in path)
    return sorted(found, key=lambda path: (len(path), path))


def test_nsfnet_paths_match_hand_checked_lists():
    topology = load_topology("nsfnet")
    assert topology.paths[(0, 5)] == ((0, 2, 5), (0, 1, 2, 5), (0, 3, 4, 5), (0, 1, 7, 6, 4, 5))
    # No 3- or 4-hop path from 0 to 1: 1's neighbours are 0, 2, 7 and none of 2's or 7's
    # other neighbours (5; 6, 10) is two hops from 0 without passing 1 or 2.
    assert topology.paths[(0, 1)] == ((0, 1), (0, 2, 1), (0, 3, 4, 5, 2, 1), (0, 3, 4, 6, 7, 1))
    # The reverse direction sorts its ties by its own node sequence.
    assert topology.paths[(5, 0)] == ((5, 2, 0), (5, 2, 1, 0), (5, 4, 3, 0), (5, 4, 6, 7, 1, 0))


def test_sizes_link_order_and_capacity(named):
    name, topology = named
    num_nodes, undirected, pairs = SIZES[name]
    data = shipped_json(name)
    assert topology.num_nodes == num_nodes
    assert topology.num_links == 2 * undirected
    assert topology.links.tolist() == data["env_link_index_order"]
    assert reference_link_order(data["directed_edges"]) == [
        tuple(link) for link in data["env_link_index_order"]
    ]
    both = {(u, v) for u, v in data["edges"]} | {(v, u) for u, v in data["edges"]}
    assert set(map(tuple, topology.links.tolist())) == both
    assert topology.capacity == 200.0 and topology.k == 4
    assert len(topology.message_pairs) == pairs


def test_every_pair_has_k_paths_with_the_reference_hop_histogram(named):
    name, topology = named
    n = topology.num_nodes
    assert len(topology.paths) == n * (n - 1)
    hops = collections.Counter(len(path) - 1 for paths in topology.paths.values() for path in paths)
    assert dict(hops) == HOP_HISTOGRAMS[name]
    assert all(len(set(paths)) == 4 for paths in topology.paths.values())


def test_incidence_and_hops_encode_the_paths(named):
    _, topology = named
    index = {tuple(link): i for i, link in enumerate(topology.links.tolist())}
    for (s, t), paths in topology.paths.items():
        for k, path in enumerate(paths):
            expected = np.zeros(topology.num_links, np.float32)
            expected[[index[edge] for edge in zip(path[:-1], path[1:])]] = 1.0
            np.testing.assert_array_equal(topology.incidence[s, t, k], expected)
            assert topology.hops[s, t, k] == len(path) - 1
            assert path[0] == s and path[-1] == t and len(set(path)) == len(path)
    diagonal = np.arange(topology.num_nodes)
    assert not topology.incidence[diagonal, diagonal].any()


def test_paths_equal_the_sorted_list_of_all_simple_paths():
    nsfnet = load_topology("nsfnet")
    for (s, t), paths in nsfnet.paths.items():
        assert paths == tuple(all_simple_paths_sorted(nsfnet, s, t)[:4]), (s, t)
    geant2 = load_topology("geant2")
    for s, t in [(0, 23), (23, 0), (14, 10), (4, 19)]:
        assert geant2.paths[(s, t)] == tuple(all_simple_paths_sorted(geant2, s, t)[:4])


def test_message_pairs_join_upstream_links_without_u_turns(named):
    _, topology = named
    links = topology.links
    first, second = links[topology.message_pairs[:, 0]], links[topology.message_pairs[:, 1]]
    assert (first[:, 1] == second[:, 0]).all()  # (i, j) then (j, m)
    assert (first[:, 0] != second[:, 1]).all()  # m != i
    assert len(set(map(tuple, topology.message_pairs.tolist()))) == len(topology.message_pairs)


def test_user_json_with_undirected_edges(tmp_path):
    data = shipped_json("nsfnet")
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"nodes": 14, "edges": data["edges"], "capacity": 100}))
    mine, reference = load_topology(path), load_topology("nsfnet")
    assert mine.name == "mine" and mine.capacity == 100.0
    # Without a stored link order the links come in the order of `edges`, both ways.
    assert mine.links[:4].tolist() == [[0, 1], [0, 2], [0, 3], [1, 0]]
    assert set(map(tuple, mine.links.tolist())) == set(map(tuple, reference.links.tolist()))
    assert mine.paths == reference.paths


def test_graph_with_named_nodes():
    # Any object that iterates its nodes and maps a node to its neighbours, as networkx does.
    ring = {"a": ["b", "d"], "b": ["a", "c"], "c": ["b", "d"], "d": ["c", "a"]}
    topology = load_topology(ring, k=2)
    assert topology.node_names == ("a", "b", "c", "d")
    assert topology.links.tolist()[:3] == [[0, 1], [0, 3], [1, 0]]
    assert topology.paths[(0, 2)] == ((0, 1, 2), (0, 3, 2))
    assert topology.paths[(0, 1)] == ((0, 1), (0, 3, 2, 1))


def test_networkx_graph():
    nx = pytest.importorskip("networkx")
    graph = nx.Graph([tuple(edge) for edge in shipped_json("nsfnet")["edges"]])
    assert load_topology(graph).paths == load_topology("nsfnet").paths


def test_malformed_topologies_are_rejected():
    with pytest.raises(ValueError, match="not strongly connected"):
        make_topology(3, [(0, 1), (1, 0), (1, 2)])
    with pytest.raises(ValueError, match="fewer than k = 2"):
        make_topology(2, [(0, 1), (1, 0)], k=2)
    with pytest.raises(ValueError, match="twice"):
        make_topology(2, [(0, 1), (0, 1), (1, 0)])
    with pytest.raises(ValueError, match="outside nodes"):
        make_topology(2, [(0, 1), (1, 2)])
    with pytest.raises(ValueError, match="valid sources"):
        load_topology(42)
