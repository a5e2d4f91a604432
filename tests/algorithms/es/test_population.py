"""The batched forward pass of M members equals M separate forward passes."""

import gymnasium as gym
import numpy as np
import tensorflow as tf

from batchrl.networks import PopulationMLP, action_size, to_action


def test_batched_members_equal_separate_passes():
    net = PopulationMLP(observ_size=5, hidden=[16, 8], output_size=3, activation="tanh")
    assert net.num_params == 5 * 16 + 16 + 16 * 8 + 8 + 8 * 3 + 3
    theta = net.init_params(seed=1)
    assert theta.shape == [net.num_params]
    np.testing.assert_array_equal(theta, net.init_params(seed=1))
    rng = np.random.default_rng(0)
    params = theta[None] + rng.normal(size=(6, net.num_params)).astype(np.float32)  # [M, D]
    observ = rng.normal(size=(6, 4, 5)).astype(np.float32)  # [M, E, O]
    batched = tf.function(net.apply)(params, observ).numpy()  # [M, E, 3]
    assert batched.shape == (6, 4, 3)
    for m in range(6):
        single = net.apply(params[m : m + 1], observ[m : m + 1]).numpy()[0]
        np.testing.assert_allclose(batched[m], single, rtol=1e-5, atol=1e-6)
        # And by hand in numpy, from the documented layout.
        x, offset = observ[m].astype(np.float64), 0
        p = params[m].numpy()
        for layer, (i, o) in enumerate(net.shapes):
            w = p[offset : offset + i * o].reshape(i, o)
            b = p[offset + i * o : offset + i * o + o]
            offset += i * o + o
            x = x @ w + b
            x = np.tanh(x) if layer < 2 else x
        np.testing.assert_allclose(batched[m], x, rtol=1e-4, atol=1e-5)


def test_actions_for_box_and_discrete():
    discrete = gym.spaces.Discrete(3)
    assert action_size(discrete) == 3
    logits = tf.constant([[[0.0, 2.0, 1.0]], [[5.0, 0.0, 1.0]]])  # [M=2, E=1, 3]
    assert to_action(logits, discrete).numpy().tolist() == [[1], [0]]
    box = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
    assert action_size(box) == 1
    mean = tf.constant([[[3.0]], [[-0.5]]])
    np.testing.assert_allclose(to_action(mean, box).numpy(), [[[2.0]], [[-0.5]]])
    squashed = to_action(tf.constant([[0.0], [100.0]]), box, squash=True).numpy()
    np.testing.assert_allclose(squashed, [[0.0], [2.0]], atol=1e-6)
