"""Permutations without a sort: exact bijections, the same in graph mode and under XLA."""

import collections
import itertools

import numpy as np
import pytest
import tensorflow as tf

from batchrl.parts.permutations import ROUNDS, feistel, random_permutations


@pytest.mark.parametrize("size", [1, 2, 3, 17, 255, 256, 257, 1000, 1024, 2048])
def test_every_row_is_a_permutation_of_the_range(size):
    orders = random_permutations(tf.random.Generator.from_seed(size), 6, size).numpy()
    assert orders.shape == (6, size) and orders.dtype == np.int32
    for order in orders:
        np.testing.assert_array_equal(np.sort(order), np.arange(size))
    if size >= 16:
        assert len({tuple(order) for order in orders}) == 6


@pytest.mark.parametrize("bits", [0, 1, 2, 5, 11, 12])
def test_the_feistel_network_is_a_bijection_of_its_domain(bits):
    keys = tf.constant([[1, 2, 3, 4], [2**32 - 1, 0, 77, 2**31]], tf.uint32)
    values = feistel(tf.cast(tf.range(2**bits), tf.uint32)[None], keys, bits).numpy()
    for row in values:
        np.testing.assert_array_equal(np.sort(row), np.arange(2**bits))


def reference(value: int, keys, bits: int) -> int:
    """The network in plain Python integers."""

    def mix(x):
        x = (((x >> 16) ^ x) * 0x45D9F3B) & 0xFFFFFFFF
        return (x >> 16) ^ x

    high, low = bits - bits // 2, bits // 2
    left, right = value >> low, value & ((1 << low) - 1)
    for key in keys:
        left, right = right, left ^ (mix(right ^ key) & ((1 << high) - 1))
        high, low = low, high
    return (left << low) | right


def test_golden_values_and_a_plain_python_reference():
    # 0 -> 6 worked by hand: L, R = 0, 0 (2 and 1 bits); the four rounds give R = 2, 0, 3,
    # 0 and L = 3, so (3 << 1) | 0.
    keys = tf.constant([[1, 2, 3, 4]], tf.uint32)
    values = feistel(tf.cast(tf.range(8), tf.uint32)[None], keys, 3).numpy()
    np.testing.assert_array_equal(values[0], [6, 3, 5, 0, 2, 7, 1, 4])
    rng = np.random.default_rng(0)
    for bits in (4, 11, 20):
        keys = rng.integers(0, 2**32, size=[1, ROUNDS], dtype=np.uint64)
        some = rng.integers(0, 2**bits, size=50)
        got = feistel(tf.constant(some[None], tf.uint32), tf.constant(keys, tf.uint32), bits)
        want = [reference(int(v), [int(k) for k in keys[0]], bits) for v in some]
        np.testing.assert_array_equal(got.numpy()[0], want)


@pytest.mark.parametrize("size", [4, 5])
def test_all_orders_of_a_few_rows_appear_about_equally_often(size):
    # 24 or 120 orders (sorted keys: a network over 3 bits makes far fewer orders).
    draws = 200 * len(list(itertools.permutations(range(size))))
    orders = random_permutations(tf.random.Generator.from_seed(0), draws, size).numpy()
    counts = collections.Counter(map(tuple, orders))
    expected = 200
    assert len(counts) == draws // expected
    assert all(abs(count - expected) < 5 * np.sqrt(expected) for count in counts.values())


@pytest.mark.parametrize("size", [256, 1000, 2048])
def test_rows_share_a_minibatch_as_often_as_under_a_uniform_shuffle(size):
    # PPO cuts each order into 8 minibatches. Under a uniform shuffle two rows share one
    # with probability (m - 1) / (size - 1); rows k apart for structured k (bits of the
    # network's halves, a rollout's environments) must do so too. With 4 rounds instead
    # of 8, rows 1,024 apart of 2,048 shared a minibatch at 0.115 instead of 0.125
    # (z = -52), and rows 3 apart at z = +23.
    draws, minibatch = 2000, size // 8
    orders = random_permutations(tf.random.Generator.from_seed(3), draws, size).numpy()
    where = np.argsort(orders, axis=1) // minibatch  # [draws, size]: each row's minibatch.
    p = (minibatch - 1) / (size - 1)
    for offset in (1, 2, 3, 7, 16, 32, 64, 100, 128, 512, 1024):
        if offset < size:
            same = np.mean(where[:, :-offset] == where[:, offset:])
            z = (same - p) / np.sqrt(p * (1 - p) / (draws * (size - offset)))
            assert abs(z) < 5, (offset, same, p)


@pytest.mark.parametrize("size", [2048, 1000])
def test_graph_mode_and_xla_give_the_same_orders(size):
    def orders(jit_compile):
        rng = tf.random.Generator.from_seed(7)
        return tf.function(lambda: random_permutations(rng, 3, size), jit_compile=jit_compile)()

    np.testing.assert_array_equal(orders(False).numpy(), orders(True).numpy())


def test_a_bad_size_fails_at_once():
    with pytest.raises(ValueError, match="size must be a Python int in"):
        random_permutations(tf.random.Generator.from_seed(0), 2, 0)
