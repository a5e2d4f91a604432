"""GRU and LSTM cells against the formulas in NumPy, and unrolls that reset at episode starts."""

import numpy as np
import pytest
import tensorflow as tf

from batchrl.networks.mlp import MLP
from batchrl.networks.recurrent import (
    CoreNetwork,
    GRUCell,
    LSTMCell,
    RecurrentNetwork,
    reset_state,
)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def linear(layer, x):
    return x @ layer.w.numpy() + layer.b.numpy()


def test_gru_cell_matches_its_formula():
    cell = GRUCell(3)
    x = np.array([[0.5, -1.0], [2.0, 0.25]], np.float32)
    h = np.array([[0.1, -0.2, 0.3], [0.0, 0.5, -0.5]], np.float32)
    output, state = cell(tf.constant(x), tf.constant(h))
    xz, xr, xn = np.split(linear(cell.input, x), 3, -1)
    hz, hr, hn = np.split(linear(cell.hidden, h), 3, -1)
    z, r = sigmoid(xz + hz), sigmoid(xr + hr)
    expected = (1 - z) * np.tanh(xn + r * hn) + z * h
    np.testing.assert_allclose(state, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(output, state)


def test_lstm_cell_matches_its_formula():
    cell = LSTMCell(2)
    x = np.array([[0.5, -1.0, 0.0]], np.float32)
    h, c = np.array([[0.1, -0.2]], np.float32), np.array([[0.3, 0.4]], np.float32)
    output, state = cell(tf.constant(x), tf.constant(np.concatenate([h, c], -1)))
    i, f, g, o = np.split(linear(cell.input, x) + linear(cell.hidden, h), 4, -1)
    c_new = sigmoid(f + 1) * c + sigmoid(i) * np.tanh(g)
    h_new = sigmoid(o) * np.tanh(c_new)
    np.testing.assert_allclose(output, h_new, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state, np.concatenate([h_new, c_new], -1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_unroll_equals_steps_and_resets_where_episodes_start(cell):
    network = RecurrentNetwork(cell, 4, [8], 2)
    rng = np.random.default_rng(0)
    observ = rng.normal(size=(5, 3, 2)).astype(np.float32)  # [T, N, O]
    first = np.zeros((5, 3), bool)
    first[2, 1] = True  # Environment 1 starts a new episode at step 2.
    start = rng.normal(size=(3, network.state_size)).astype(np.float32)
    unrolled = network.unroll(tf.constant(observ), tf.constant(first), tf.constant(start))
    state = tf.constant(start)
    for t in range(5):
        state = tf.where(first[t][:, None], network.initial_state(3), state)
        output, state = network(tf.constant(observ[t]), state)
        np.testing.assert_allclose(unrolled[t], output, rtol=1e-5, atol=1e-6)
    # From step 2 on, environment 1 does not depend on what came before.
    other = start.copy()
    other[1] += 5.0
    observ[:2, 1] += 3.0
    changed = network.unroll(tf.constant(observ), tf.constant(first), tf.constant(other))
    np.testing.assert_allclose(changed[2:, 1], unrolled[2:, 1], rtol=1e-5, atol=1e-6)
    assert not np.allclose(changed[:2, 1], unrolled[:2, 1])


def test_reset_state_zeroes_the_rows_where_episodes_start():
    state = tf.constant([[1.0, -2.0], [3.0, 4.0], [5.0, 6.0]])
    for fn in (reset_state, tf.function(reset_state)):
        reset = fn(state, tf.constant([False, True, False]))
        np.testing.assert_array_equal(reset, [[1.0, -2.0], [0.0, 0.0], [5.0, 6.0]])


def test_core_network_unroll_equals_steps_with_torchbeast_resets():
    """The unroll (body on all steps, core by tf.scan) against one call per step, whose
    state is multiplied by (1 - first) as TorchBeast's AtariNet does; the bootstrap values
    continue from each step's state without a reset."""
    network = CoreNetwork(MLP([8], None, "relu"), "lstm", 5, 3)
    rng = np.random.default_rng(1)
    observ = rng.normal(size=(6, 2, 4)).astype(np.float32)  # [T, N, O]
    next_observ = rng.normal(size=(6, 2, 4)).astype(np.float32)
    first = np.zeros((6, 2), bool)
    first[0, 1] = first[3, 0] = first[4, 1] = True
    start = rng.normal(size=(2, network.state_size)).astype(np.float32)
    outputs, values, states = network.unroll(
        tf.constant(observ), tf.constant(first), tf.constant(start)
    )
    assert outputs.shape == (6, 2, 3) and values.shape == (6, 2) and states.shape == (6, 2, 10)
    bootstrap = network.bootstrap_values(tf.constant(next_observ), states)
    state = start
    for t in range(6):
        state = state * (1 - first[t][:, None]).astype(np.float32)
        output, value, state = network(tf.constant(observ[t]), tf.constant(state))
        _, next_value, _ = network(tf.constant(next_observ[t]), state)
        np.testing.assert_allclose(outputs[t], output, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(values[t], value, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(states[t], state, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(bootstrap[t], next_value, rtol=1e-5, atol=1e-6)
    # The step's own reset gives the same as resetting before the call.
    _, value, _ = network(tf.constant(observ[0]), tf.constant(start), tf.constant(first[0]))
    np.testing.assert_allclose(value, values[0], rtol=1e-5, atol=1e-6)
    # Environment 1 starts at step 0: its start state does not matter; environment 0's
    # does until its episode starts at step 3.
    other = start + 3.0
    changed = network.unroll(tf.constant(observ), tf.constant(first), tf.constant(other))[1]
    np.testing.assert_allclose(changed[:, 1], values[:, 1], rtol=1e-5, atol=1e-6)
    assert not np.allclose(changed[:3, 0], values[:3, 0])
