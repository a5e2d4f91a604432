"""Tests of the network helpers that are not covered by the algorithms' tests."""

import numpy as np
import pytest
import tensorflow as tf

from batchrl.networks import MLP, Conv2D, PopulationMLP, batch_apply


@pytest.mark.parametrize("mode", ["eager", "function"])
def test_batch_apply_runs_a_network_on_time_major_batches(mode):
    network = MLP([8], 3)
    x = tf.constant(np.random.default_rng(0).normal(size=(5, 4, 2)), tf.float32)  # [T, B, O]
    network(x[0])
    apply = lambda x: batch_apply(network, x)
    if mode == "function":
        apply = tf.function(apply)
    result = apply(x)
    assert result.shape == (5, 4, 3)
    for t in range(5):
        np.testing.assert_allclose(result[t], network(x[t]), rtol=1e-5, atol=1e-6)


def test_batch_apply_keeps_several_inner_axes():
    x = tf.reshape(tf.range(24.0), [2, 3, 2, 2])  # [T, B, 2, 2]
    result = batch_apply(lambda flat: tf.reduce_sum(flat, [1, 2])[:, None], x, inner_rank=2)
    np.testing.assert_array_equal(result[..., 0], tf.reduce_sum(x, [2, 3]))


def test_conv2d_matches_a_direct_sum():
    """y[n, i, j, f] = sum_{di, dj, c} x[n, i + di, j + dj, c] w[di, dj, c, f] + b[f]."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 5, 4, 3)).astype(np.float32)  # [N, H, W, C]
    layer = Conv2D(2)
    layer(x)
    layer.w.assign(rng.normal(size=(3, 3, 3, 2)).astype(np.float32))
    layer.b.assign([0.5, -1.0])
    expected = np.zeros((2, 3, 2, 2))
    for i in range(3):
        for j in range(2):
            patch = x[:, i : i + 3, j : j + 3, :]  # [N, 3, 3, C]
            expected[:, i, j, :] = np.einsum("nabc,abcf->nf", patch, layer.w.numpy()) + [0.5, -1]
    np.testing.assert_allclose(layer(x), expected, rtol=1e-5, atol=1e-5)


def test_mlp_with_convolutions_takes_images_and_rejects_vectors():
    network = MLP([8], 3, "relu", conv_filters=[4, 2])
    assert network(tf.zeros([5, 10, 10, 4])).shape == (5, 3)
    # 10x10 -> 8x8x4 -> 6x6x2 = 72 inputs to the dense layer.
    assert network.hidden[0].w.shape == (72, 8)
    with pytest.raises(ValueError, match=r"image observations \[N, H, W, C\]"):
        MLP([8], 3, conv_filters=[4])(tf.zeros([5, 6]))


def test_population_mlp_computes_what_the_mlps_it_flattens_compute():
    mlps = [MLP([8, 8], 3, "tanh", 0.5) for _ in range(2)]
    observ = tf.random.stateless_normal([2, 5, 4], seed=[1, 2])  # [M, N, O]
    expected = [mlp(observ[m]) for m, mlp in enumerate(mlps)]
    population = PopulationMLP(4, [8, 8], 3, "tanh")
    params = tf.stack([population.flatten(mlp) for mlp in mlps])  # [M, D]
    assert params.shape == (2, population.num_params)
    np.testing.assert_allclose(population.apply(params, observ), expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="is not one of"):
        PopulationMLP(4, [8], 3).flatten(mlps[0])


def test_uniform_init_draws_weights_and_biases_as_pytorch_layers_do():
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for both, fan_in a convolution's k * k * C."""
    tf.keras.utils.set_random_seed(0)
    network = MLP([64], 3, "relu", conv_filters=[16], init="uniform")
    network(tf.zeros([1, 10, 10, 4]))
    conv, dense, output = network.conv[0], network.hidden[0], network.output
    for layer, fan_in in [(conv, 3 * 3 * 4), (dense, 8 * 8 * 16), (output, 64)]:
        bound = 1.0 / np.sqrt(fan_in)
        for values in (layer.w.numpy(), layer.b.numpy()):
            assert np.abs(values).max() <= bound and np.abs(values).min() > 0
            if values.size >= 16:
                assert np.abs(values).max() > 0.8 * bound  # Spread over the interval...
                assert abs(values.mean()) < 0.3 * bound  # ...around zero.
    w = dense.w.numpy()  # [1024, 64]: the variance of U(-a, a) is a^2 / 3.
    np.testing.assert_allclose(w.var(), 1.0 / (3 * 8 * 8 * 16), rtol=0.05)


def test_orthogonal_init_is_the_default_with_zero_biases():
    tf.keras.utils.set_random_seed(0)
    network = MLP([32], 8, "relu", output_gain=0.5)
    network(tf.zeros([1, 32]))
    hidden, output = network.hidden[0], network.output
    np.testing.assert_allclose(hidden.w.numpy().T @ hidden.w.numpy(), 2 * np.eye(32), atol=1e-5)
    np.testing.assert_allclose(output.w.numpy().T @ output.w.numpy(), 0.25 * np.eye(8), atol=1e-5)
    assert not hidden.b.numpy().any() and not output.b.numpy().any()


def test_an_unknown_init_is_refused_naming_the_valid_ones():
    with pytest.raises(ValueError, match=r"'normal'.*\['orthogonal', 'uniform'\]"):
        MLP([8], 2, init="normal")
