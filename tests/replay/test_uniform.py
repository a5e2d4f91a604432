"""The uniform replay: even coverage of what it holds, and priorities that change nothing."""

import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

from batchrl.replay import UniformReplay

SPEC = {"observ": tf.TensorSpec([2], tf.float32), "action": tf.TensorSpec([], tf.int32)}


def items(numbers):
    numbers = np.asarray(numbers, np.int32)
    return {"observ": np.stack([numbers, -numbers], 1).astype(np.float32), "action": numbers}


@pytest.mark.parametrize("held", [10, 7])
def test_sampled_indices_cover_what_is_held_uniformly(held):
    # 20,000 draws of independent uniform indices are multinomial, so Pearson's statistic
    # over the held indices is chi-square with held - 1 degrees of freedom: a correct
    # sampler fails p < 0.001 for one seed in a thousand, and the seed is fixed. An off-by-one
    # (index `size` drawn, or index size - 1 never) gives p = 0.
    buffer = UniformReplay(10, SPEC, seed=held)
    buffer.add(items(range(held)))
    sample = tf.function(lambda: buffer.sample(1000)[0])
    indices = np.concatenate([sample().numpy() for _ in range(20)])
    assert indices.min() >= 0 and indices.max() < held
    counts = np.bincount(indices, minlength=held)
    assert stats.chisquare(counts).pvalue > 1e-3, counts


def test_priorities_are_ignored():
    with_priorities, without = UniformReplay(8, SPEC, seed=1), UniformReplay(8, SPEC, seed=1)
    with_priorities.add(items(range(6)), priorities=tf.constant([9.0, 0, 0, 0, 0, 0]))
    without.add(items(range(6)))
    with_priorities.update_priorities(tf.constant([1, 2]), tf.constant([100.0, 0.0]))
    for _ in range(3):
        first, second = with_priorities.sample(8, 0.5), without.sample(8, 0.5)
        for got, want in zip(tf.nest.flatten(first), tf.nest.flatten(second)):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
        np.testing.assert_array_equal(first[1].numpy(), np.ones(8))
