"""The routing graph network: parameter counts, link-order invariance, batched members."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from batchrl.config import ConfigError, load_run_config
from batchrl.envs.routing import Routing, RoutingGraphFeatures, load_topology
from batchrl.networks.factory import make_network, make_population_network
from batchrl.networks.graph import (
    GraphCore,
    GraphNetwork,
    GraphPopulation,
    incoming_senders,
    weight_shapes,
)


def observations(topology, count, seed=3, steps=6):
    """Observations [count, O] of networks partly filled by `steps` random actions."""
    env = Routing(count, seed=seed, topology=topology)
    observ = env.reset(tf.range(count))
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        action = tf.constant(rng.integers(0, topology.k, count), tf.int32)
        observ, *_ = env.step(action)
    return observ.numpy()


@pytest.mark.parametrize(
    "name, size, readout, count",
    [("nsfnet", 25, 20, 6136), ("geant2", 35, 35, 12601)],
)
def test_parameter_counts_match_the_reference(name, size, readout, count):
    # REFERENCE.md: saved_params/nsfnet_v1.pkcl is float32 [6136], geant2_v1 [12601].
    net = GraphPopulation(RoutingGraphFeatures(name), size, readout)
    assert net.num_params == count
    assert net.init_params(0).shape == (count,)
    assert sum(int(np.prod(s)) for _, s in weight_shapes(size, readout)) == count


def permuted(topology, order):
    """The same network with its links listed in `order` (new link i is old link order[i])."""
    inverse = np.append(np.argsort(order), topology.num_links)  # old -> new; padding stays
    return dataclasses.replace(
        topology,
        links=topology.links[order],
        path_links=inverse[topology.path_links],
        message_pairs=inverse[topology.message_pairs],
    )


def permute_observ(observ, topology, order):
    """The observations [B, L + 3] with their capacities in the permuted links' order."""
    num_links = topology.num_links
    return np.concatenate([observ[:, :num_links][:, order], observ[:, num_links:]], 1)


@pytest.mark.parametrize("name", ["nsfnet", "geant2"])
def test_scores_do_not_depend_on_the_link_order(name):
    topology = load_topology(name)
    order = np.random.default_rng(0).permutation(topology.num_links)
    other = permuted(topology, order)
    observ = observations(topology, 5)
    net = GraphPopulation(RoutingGraphFeatures(topology), 8, 8)
    net_permuted = GraphPopulation(RoutingGraphFeatures(other), 8, 8)
    params = net.init_params(1)[None]
    policy = net.apply(params, observ[None])[0]
    policy_permuted = net_permuted.apply(params, permute_observ(observ, topology, order)[None])
    np.testing.assert_allclose(policy_permuted[0], policy, rtol=1e-5, atol=1e-6)
    # Not a constant: the candidates get different probabilities.
    assert np.ptp(policy.numpy(), axis=1).min() > 1e-4


def test_batched_members_equal_separate_passes():
    topology = load_topology("nsfnet")
    net = GraphPopulation(RoutingGraphFeatures(topology), 25, 20)
    params = tf.stack([net.init_params(seed) for seed in range(3)])  # [3, D]
    observ = observations(topology, 6).reshape(3, 2, -1)  # [M, E, O]
    batched = tf.function(net.apply)(params, observ)  # [3, 2, K]
    for member in range(3):
        alone = net.apply(params[member : member + 1], observ[member : member + 1])
        np.testing.assert_allclose(batched[member], alone[0], rtol=1e-5, atol=1e-6)
    assert not np.allclose(batched[0], batched[1])  # Members differ.


def test_module_equals_population_and_survives_a_checkpoint(tmp_path):
    topology = load_topology("nsfnet")
    features = RoutingGraphFeatures(topology)
    actor = GraphNetwork(features, critic=False, link_state_size=12, readout_units=10, seed=4)
    critic = GraphNetwork(features, critic=True, link_state_size=12, readout_units=10, seed=5)
    population = GraphPopulation(features, 12, 10)
    observ = observations(topology, 4)
    flat = tf.concat([tf.reshape(actor.weights[n], [-1]) for n, _ in population.shapes], 0)
    logits = actor(observ)  # [4, K]
    np.testing.assert_allclose(
        tf.nn.softmax(logits), population.apply(flat[None], observ[None])[0], rtol=1e-5
    )
    value = critic(observ)
    assert value.shape == (4, 1)
    assert len(actor.trainable_variables) == len(weight_shapes(12, 10))
    path = tf.train.Checkpoint(actor=actor).save(str(tmp_path / "ckpt"))
    restored = GraphNetwork(features, critic=False, link_state_size=12, readout_units=10, seed=9)
    np.testing.assert_raises(AssertionError, np.testing.assert_allclose, restored(observ), logits)
    tf.train.Checkpoint(actor=restored).restore(path).assert_consumed()
    np.testing.assert_allclose(restored(observ), logits)


def test_the_config_chooses_the_graph_network_and_checks_its_keys():
    config = load_run_config("nsfnet_es")
    net = make_population_network(config.network, 0, 4)
    assert isinstance(net, GraphPopulation) and net.num_params == 6136
    actor = make_network(config.network, (), 4, 0.1, "policy")
    assert isinstance(actor, GraphNetwork) and not actor.critic
    assert make_network(config.network, (), 1, 1.0, "value").critic
    with pytest.raises(ConfigError, match="network.topology"):
        load_run_config("nsfnet_es", ["network.topology=''"])
    with pytest.raises(ConfigError, match="es.normalize_observ"):
        load_run_config("nsfnet_es", ["es.normalize_observ=true"])
    with pytest.raises(ConfigError, match="network.topology='nowhere.json'"):
        make_population_network(
            load_run_config("nsfnet_es", ["network.topology=nowhere.json"]).network, 0, 4
        )
    with pytest.raises(ConfigError, match="network.graph_features='routes'"):
        load_run_config("nsfnet_es", ["network.graph_features=routes"])
    geant2 = GraphPopulation(RoutingGraphFeatures("geant2"), 8, 8)
    nsfnet_observ = observations(load_topology("nsfnet"), 2)
    with pytest.raises(ValueError, match="size 77, not 45"):
        geant2.apply(geant2.init_params(0)[None], nsfnet_observ[None])


class Chain:
    """A `GraphFeatures` of no environment: vertices 0 -> 1 -> 2, observations [..., 3]
    are one feature per vertex; action a's graph adds a second feature on vertex a."""

    name = "chain"
    num_vertices = 3
    edges = np.array([[0, 1], [1, 2]])
    num_features = 2
    num_actions = 2

    def action_graphs(self, observ):
        values = tf.broadcast_to(
            observ[..., None, :], tf.concat([tf.shape(observ)[:-1], [2, 3]], 0)
        )
        marks = tf.broadcast_to(tf.eye(2, 3), tf.shape(values))
        return tf.stack([values, marks], -1)  # [..., 2, 3, 2]

    def state_graph(self, observ):
        return observ[..., None, :, None]  # [..., 1, 3, 1]


def test_the_network_reads_any_graph_and_its_features():
    observ = np.array([[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]], np.float32)  # [N, 3]
    actor = GraphNetwork(Chain(), critic=False, link_state_size=4, readout_units=3, seed=0)
    population = GraphPopulation(Chain(), 4, 3)
    flat = tf.concat([tf.reshape(actor.weights[n], [-1]) for n, _ in population.shapes], 0)
    logits = actor(observ)  # [N, 2]
    np.testing.assert_allclose(
        tf.nn.softmax(logits), population.apply(flat[None], observ[None])[0], rtol=1e-5
    )
    assert not np.allclose(logits[:, 0], logits[:, 1])  # The two actions' graphs differ.
    critic = GraphNetwork(Chain(), critic=True, link_state_size=4, readout_units=3, seed=1)
    assert critic(observ).shape == (2, 1)
    with pytest.raises(ValueError, match="chain's graphs start from 2 features"):
        GraphPopulation(Chain(), link_state_size=1)


class Star:
    """Chain's shape with edges 0 -> 2, 1 -> 2, 0 -> 1: vertex 2 has two incoming edges,
    vertex 0 none (a family of it and Chain: `graphs`)."""

    name = "star"
    num_vertices = 3
    edges = np.array([[0, 2], [1, 2], [0, 1]])
    num_features = 2
    num_actions = 2


def test_incoming_senders_name_each_vertexs_senders_and_mask_the_padding():
    senders, mask = incoming_senders(3, Star.edges, 2)
    np.testing.assert_array_equal(senders, [[0, 0], [0, 0], [0, 1]])
    np.testing.assert_array_equal(mask, [[0, 0], [1, 0], [1, 1]])
    senders, mask = incoming_senders(4, Chain.edges, 3)
    np.testing.assert_array_equal(senders, [[0, 0, 0], [0, 0, 0], [1, 0, 0], [0, 0, 0]])
    np.testing.assert_array_equal(mask, [[0, 0, 0], [1, 0, 0], [1, 0, 0], [0, 0, 0]])


def test_each_vertex_of_a_family_sums_the_messages_from_its_own_senders():
    """Golden sums, with selu(u + d + b) = u + d + b for positive numbers: graph 0 is a
    Star (vertex 0 hears nothing, vertex 1 vertex 0, vertex 2 vertices 0 and 1), graph 1
    a Chain (vertex 1 hears vertex 0, vertex 2 vertex 1), for two members."""

    class Family(Star):
        edges = None
        graphs = ((3, Star.edges), (3, Chain.edges))

    core = GraphCore(Family(), 2, 1, 1)
    up = np.array([[1.0, 10.0], [2.0, 20.0], [4.0, 40.0]], np.float32)  # [V, H]
    up = tf.constant(np.stack([np.stack([up, 2 * up])] * 2))  # [M, G, V, H] = [2, 2, 3, 2]
    down = tf.fill([2, 2, 3, 2], 100.0)
    bias = tf.constant([0.0, 1000.0])[None, None, None, :] * tf.ones([2, 1, 1, 1])
    which = tf.constant([[0, 1], [1, 0]])  # Member 0: Star, Chain; member 1: Chain, Star.
    senders, mask = core.family_senders(which)
    scale = float(tf.nn.selu(1.0))  # selu(x) = scale x for x > 0.
    incoming = core.family_incoming(up, down, bias, senders, mask).numpy() / scale
    # Vertex v's sum over its senders s of (u_s + 100, u_s + 1100), u_s of its graph.
    star, star_doubled = [[0, 0], [101, 1110], [203, 2230]], [[0, 0], [102, 1120], [206, 2260]]
    chain, chain_doubled = [[0, 0], [101, 1110], [102, 1120]], [[0, 0], [102, 1120], [104, 1140]]
    np.testing.assert_allclose(incoming, [[star, chain_doubled], [chain, star_doubled]], rtol=1e-6)


def test_ppo_gets_a_graph_actor_and_critic_and_raw_observations():
    from batchrl.algorithms.ppo import PPO

    config = load_run_config("nsfnet_ppo", ["env.num_envs=2"])
    batch_env = Routing(2, seed=0, topology="nsfnet")
    algo = PPO(batch_env, config)
    assert isinstance(algo.policy, GraphNetwork) and not algo.policy.critic
    assert isinstance(algo.value, GraphNetwork) and algo.value.critic
    observ = observations(load_topology("nsfnet"), 2)
    algo.observ_normalizer.update(observ)
    np.testing.assert_array_equal(algo.observ_normalizer.normalize(observ), observ)
    assert algo.act(observ).shape == (2,)


def test_unseeded_graph_networks_follow_the_global_seed():
    """PPO's graph actor and critic (built without a seed) differ from run seed to run
    seed and from each other, and repeat for the same seed."""
    from batchrl.algorithms.ppo import PPO

    config = load_run_config("nsfnet_ppo", ["env.num_envs=2"])

    def initial(seed):
        tf.keras.utils.set_random_seed(seed)
        algo = PPO(Routing(2, seed=0, topology="nsfnet"), config)
        return algo.policy.weights["message_kernel"].numpy(), algo.value.weights[
            "message_kernel"
        ].numpy()

    actor0, critic0 = initial(0)
    actor0_again, _ = initial(0)
    actor1, _ = initial(1)
    np.testing.assert_array_equal(actor0, actor0_again)
    assert not np.allclose(actor0, actor1)
    assert not np.allclose(actor0, critic0)


class MarkedChain(Chain):
    """Chain, whose action a acts on vertex a: the vertices a path readout sums."""

    def action_vertices(self, observ):
        shape = tf.concat([tf.shape(observ)[:-1], [2, 3]], 0)
        return tf.broadcast_to(tf.eye(2, 3), shape)  # [..., 2, 3]


def test_a_path_readout_reads_all_vertices_and_the_marked_ones():
    """Golden readout: the first dense layer reads [sum of all h ; sum of marked h]."""
    core = GraphCore(MarkedChain(), 2, 2, 1, path_readout=True)
    weights = {
        name: tf.constant(np.random.default_rng(index).normal(size=(1, *shape)), tf.float32)
        for index, (name, shape) in enumerate(weight_shapes(2, 2, path_readout=True))
    }
    assert weights["readout1_kernel"].shape == (1, 4, 2)
    h = np.array([[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]], np.float32)[None]  # [M, G, V, H]
    marked = np.array([[[0.0, 1.0, 1.0]]], np.float32)  # [M, G, V]
    g = np.array([[[9.0, 12.0, 8.0, 10.0]]], np.float32)  # all: (9, 12); marked: (8, 10)
    w = {name: value.numpy()[0] for name, value in weights.items()}
    selu = lambda x: tf.nn.selu(x).numpy()  # noqa: E731
    g = selu(g @ w["readout1_kernel"] + w["readout1_bias"])
    g = selu(g @ w["readout2_kernel"] + w["readout2_bias"])
    expected = (g @ w["readout3_kernel"] + w["readout3_bias"])[..., 0]
    np.testing.assert_allclose(core.read(weights, h, marked), expected, rtol=1e-5)
    with pytest.raises(ValueError, match="needs `marked`"):
        core.read(weights, h)


def test_a_path_readout_actor_equals_its_population_and_routes():
    observ = np.array([[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]], np.float32)  # [N, 3]
    actor = GraphNetwork(
        MarkedChain(), critic=False, link_state_size=4, readout_units=3, seed=0, path_readout=True
    )
    population = GraphPopulation(MarkedChain(), 4, 3, path_readout=True)
    assert population.num_params == GraphPopulation(MarkedChain(), 4, 3).num_params + 4 * 3
    flat = tf.concat([tf.reshape(actor.weights[n], [-1]) for n, _ in population.shapes], 0)
    np.testing.assert_allclose(
        tf.nn.softmax(actor(observ)), population.apply(flat[None], observ[None])[0], rtol=1e-5
    )
    with pytest.raises(ValueError, match="critic's graph marks no action"):
        GraphNetwork(MarkedChain(), critic=True, path_readout=True)
    # Routing marks each candidate path's links; the config turns it on for the actor.
    topology = load_topology("nsfnet")
    observ = observations(topology, 3)
    marks = RoutingGraphFeatures(topology).action_vertices(observ)  # [3, K, L]
    onehot = RoutingGraphFeatures(topology).action_graphs(observ)[..., 1:]  # [3, K, L, 3]
    np.testing.assert_array_equal(marks, tf.reduce_max(onehot, -1))
    config = load_run_config("nsfnet_es", ["network.path_readout=true"])
    net = make_population_network(config.network, 0, 4)
    assert net.core.path_readout and net.num_params == 6136 + 25 * 20
    assert np.isfinite(net.apply(net.init_params(0)[None], observ[None])).all()
    assert make_network(config.network, (), 4, 0.1, "policy").core.path_readout
    assert not make_network(config.network, (), 1, 1.0, "value").core.path_readout
