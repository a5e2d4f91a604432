"""Tests of the network helpers that are not covered by the algorithms' tests."""

import numpy as np
import pytest
import tensorflow as tf

from batchrl.tools.networks import MLP, batch_apply


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
