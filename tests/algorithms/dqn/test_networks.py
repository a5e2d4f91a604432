"""DQN's dueling network: its own hidden layers per stream over a shared torso."""

import numpy as np
import tensorflow as tf

from batchrl.algorithms.dqn import DuelingQNetwork, make_q_network, networks
from batchrl.networks import MLP


def observations(shape=(5, 4), seed=0):
    return tf.constant(np.random.default_rng(seed).normal(size=shape), tf.float32)


def test_the_value_and_advantage_streams_have_hidden_layers_of_their_own():
    network = DuelingQNetwork([16, 8], 3, "relu", name="q")
    x = observations()
    q = network(x)
    assert q.shape == (5, 3)
    value_layers = [(layer.w.shape, layer.b.shape) for layer in network.value.hidden]
    advantage_layers = [(layer.w.shape, layer.b.shape) for layer in network.advantage.hidden]
    assert value_layers == advantage_layers == [((4, 16), (16,)), ((16, 8), (8,))]
    assert network.value.output.w.shape == (8, 1)
    assert network.advantage.output.w.shape == (8, 3)
    assert not network.torso.trainable_variables  # Vectors: nothing shared.
    value_ids = {id(v) for v in network.value.trainable_variables}
    advantage_ids = {id(v) for v in network.advantage.trainable_variables}
    assert len(value_ids) == len(advantage_ids) == 6 and not value_ids & advantage_ids
    assert len(network.trainable_variables) == 12
    value, advantage = network.streams(x)
    np.testing.assert_allclose(q, networks.dueling(value, advantage), rtol=1e-6)


def test_changing_one_stream_leaves_the_other_unchanged():
    network = DuelingQNetwork([16, 8], 3, "relu", name="q")
    x = observations()
    value, advantage = network.streams(x)
    for layer in network.value.hidden:  # The value stream's hidden layers only.
        layer.w.assign(layer.w * 2.0 + 0.1)
    new_value, new_advantage = network.streams(x)
    np.testing.assert_array_equal(new_advantage, advantage)
    assert not np.allclose(new_value, value)
    for layer in network.advantage.hidden:
        layer.w.assign(layer.w * 2.0 + 0.1)
    newer_value, newer_advantage = network.streams(x)
    np.testing.assert_array_equal(newer_value, new_value)
    assert not np.allclose(newer_advantage, new_advantage)


def test_convolutions_are_the_shared_torso():
    network = DuelingQNetwork([32], 3, "relu", conv_filters=[4], name="q")
    x = observations((2, 5, 5, 2))
    assert network(x).shape == (2, 3)
    assert network.torso.conv[0].w.shape == (3, 3, 2, 4)
    assert network.value.hidden[0].w.shape == (3 * 3 * 4, 32)
    assert network.advantage.hidden[0].w.shape == (3 * 3 * 4, 32)
    torso = {id(v) for v in network.torso.trainable_variables}
    streams = {id(v) for v in network.value.trainable_variables + network.advantage.variables}
    assert len(torso) == 2 and not torso & streams
    # The torso changes both streams.
    value, advantage = network.streams(x)
    network.torso.conv[0].w.assign(network.torso.conv[0].w * 2.0)
    new_value, new_advantage = network.streams(x)
    assert not np.allclose(new_value, value) and not np.allclose(new_advantage, advantage)


def test_uint8_frames_are_scaled_to_zero_one():
    network = DuelingQNetwork([8], 2, "relu", name="q")
    frames = tf.constant([[0, 51, 255]], tf.uint8)
    np.testing.assert_allclose(network(frames), network(tf.constant([[0.0, 0.2, 1.0]])))


def test_make_q_network_without_dueling_is_one_mlp():
    network = make_q_network([16], 3, "relu", (), False, "q")
    assert isinstance(network, MLP)
    assert network(observations()).shape == (5, 3)
    assert isinstance(make_q_network([16], 3, "relu", (), True, "q"), DuelingQNetwork)


def test_a_checkpoint_restores_both_streams(tmp_path):
    x = observations()
    saved = DuelingQNetwork([16, 8], 3, "relu", name="q")
    q = saved(x)
    path = tf.train.Checkpoint(network=saved).save(str(tmp_path / "ckpt"))
    restored = DuelingQNetwork([16, 8], 3, "relu", name="q")
    restored(x)  # Builds the variables, with other initial values.
    assert not np.allclose(restored(x), q)
    tf.train.Checkpoint(network=restored).restore(path).assert_consumed()
    np.testing.assert_array_equal(restored(x), q)
    for a, b in zip(saved.variables, restored.variables):
        np.testing.assert_array_equal(a, b)


def test_q_networks_start_as_pytorch_layers_do():
    """Both kinds of Q network start from networks.INIT, uniform: biases are not zero and
    each weight lies within 1/sqrt(fan_in)."""
    assert networks.INIT == "uniform"
    x = observations()
    plain = make_q_network([16], 3, "relu", (), False, "q")
    duel = make_q_network([16], 3, "relu", (), True, "q")
    plain(x), duel(x)
    layers = [plain.hidden[0], plain.output, duel.value.hidden[0], duel.advantage.output]
    for layer, fan_in in zip(layers, [4, 16, 4, 16]):
        assert np.abs(layer.b.numpy()).max() > 0
        assert np.abs(layer.w.numpy()).max() <= 1 / np.sqrt(fan_in)
