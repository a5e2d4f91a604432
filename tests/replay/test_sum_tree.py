"""The sum tree: totals, prefix-sum search against numpy, duplicates; eager, graph and XLA."""

import numpy as np
import pytest
import tensorflow as tf

from batchrl.replay import SumTree

MODES = ["eager", "function", "xla"]


def compile_fn(fn, mode):
    if mode == "eager":
        return fn
    return tf.function(fn, jit_compile=mode == "xla")


def numpy_tree(leaves: np.ndarray, size: int) -> np.ndarray:
    """The 2P nodes of a tree over `leaves` padded to P = `size` with zeros."""
    nodes = np.zeros(2 * size, np.float64)
    nodes[size : size + len(leaves)] = leaves
    for node in range(size - 1, 0, -1):
        nodes[node] = nodes[2 * node] + nodes[2 * node + 1]
    return nodes


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("capacity, padded", [(1, 1), (5, 8), (8, 8), (13, 16)])
def test_every_node_is_the_sum_of_its_leaves_after_writes_and_updates(mode, capacity, padded):
    rng = np.random.default_rng(capacity)
    tree = SumTree(capacity)
    assert tree.leaves == padded and tree.nodes.shape == [2 * padded]
    set_ = compile_fn(tree.set, mode)
    leaves = np.zeros(capacity)
    for count in (capacity, 1, max(1, capacity // 2), 3):
        indices = rng.choice(capacity, size=min(count, capacity), replace=False)
        values = rng.integers(0, 10, size=len(indices)).astype(np.float32)
        leaves[indices] = values
        set_(tf.constant(indices, tf.int32), tf.constant(values))
        np.testing.assert_array_equal(tree.nodes.numpy()[1:], numpy_tree(leaves, padded)[1:])
        assert tree.total().numpy() == leaves.sum()
        np.testing.assert_array_equal(tree.get(np.arange(capacity)).numpy(), leaves)


@pytest.mark.parametrize("mode", MODES)
def test_duplicated_indices_take_their_last_write(mode):
    tree = SumTree(6)
    set_ = compile_fn(tree.set, mode)
    set_(tf.constant([2, 5, 2, 0, 2, 5]), tf.constant([1.0, 2.0, 3.0, 4.0, 5.0, 7.0]))
    np.testing.assert_array_equal(tree.get(np.arange(6)).numpy(), [4, 0, 5, 0, 0, 7])
    assert tree.total().numpy() == 16.0
    # Many duplicates at once, against single writes in order.
    rng = np.random.default_rng(0)
    leaves = tree.get(np.arange(6)).numpy().astype(np.float64)
    indices = rng.integers(0, 6, size=40)
    values = rng.integers(0, 20, size=40).astype(np.float32)
    for index, value in zip(indices, values):
        leaves[index] = value
    set_(tf.constant(indices, tf.int32), tf.constant(values))
    np.testing.assert_array_equal(tree.nodes.numpy()[1:], numpy_tree(leaves, 8)[1:])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("capacity", [1, 5, 8, 13])
def test_find_is_a_search_of_the_cumulative_sums(mode, capacity):
    # Integer values (zeros among them) keep every float32 sum exact, so the points at the
    # boundaries of the cumulative sums are exact too.
    rng = np.random.default_rng(capacity)
    leaves = rng.integers(0, 5, size=capacity).astype(np.float32)
    leaves[-1] = max(leaves[-1], 1.0)
    tree = SumTree(capacity)
    tree.set(tf.range(capacity), tf.constant(leaves))
    cumulative = np.cumsum(leaves)
    total = cumulative[-1]
    points = np.concatenate(
        [
            [0.0, total - 0.5],
            cumulative[:-1],  # each boundary: the next leaf of positive value
            np.maximum(cumulative - 0.5, 0.0),
            cumulative[:-1] + 0.5,
            rng.uniform(0, total, size=500),
        ]
    ).astype(np.float32)
    found = compile_fn(tree.find, mode)(tf.constant(points)).numpy()
    expected = np.searchsorted(cumulative, points, side="right")
    np.testing.assert_array_equal(found, expected)
    assert np.all(leaves[found] > 0)


@pytest.mark.parametrize("mode", MODES)
def test_find_past_the_total_or_in_a_rounded_tree_returns_a_positive_leaf(mode):
    tree = SumTree(4)
    find = compile_fn(tree.find, mode)
    # An empty tree finds leaf 0.
    np.testing.assert_array_equal(find(tf.constant([0.0, 1.0])).numpy(), [0, 0])
    tree.set(tf.constant([0, 1]), tf.constant([1.0, 2.0]))  # leaves 2 and 3 hold 0
    # At or past the total, the plain descent would reach leaf 3 (value 0); the guard
    # stops at the last positive leaf.
    np.testing.assert_array_equal(find(tf.constant([3.0, 3.5, 100.0])).numpy(), [1, 1, 1])
    # A tree whose parents rounded above their children (root 10 over 4 + 5, right node
    # 5 over leaves 5 + 0): 9.5 goes right with 5.5 left, at or above the right node's 5.
    tree.nodes.assign([0.0, 10.0, 4.0, 5.0, 1.0, 3.0, 5.0, 0.0])
    np.testing.assert_array_equal(find(tf.constant([9.5, 4.0, 3.9])).numpy(), [2, 2, 1])


def test_find_in_a_large_tree_of_float_values():
    rng = np.random.default_rng(1)
    capacity = 1000
    leaves = rng.exponential(size=capacity).astype(np.float32)
    leaves[rng.choice(capacity, 100, replace=False)] = 0.0
    tree = SumTree(capacity)
    tree.set(tf.range(capacity), tf.constant(leaves))
    cumulative = np.cumsum(leaves.astype(np.float64))
    np.testing.assert_allclose(tree.total().numpy(), cumulative[-1], rtol=1e-5)
    points = rng.uniform(0, cumulative[-1], size=2000)
    # float32 sums differ from float64 ones by about 1e-7 of the total: points that close
    # to a boundary may land on either side of it.
    gap = np.min(np.abs(points[:, None] - cumulative[None, :]), axis=1)
    points = points[gap > 1e-4 * cumulative[-1]]
    found = tree.find(tf.constant(points, tf.float32)).numpy()
    np.testing.assert_array_equal(found, np.searchsorted(cumulative, points, side="right"))
    assert len(points) > 1000 and np.all(leaves[found] > 0)


def test_the_tree_survives_a_checkpoint(tmp_path):
    tree = SumTree(5)
    tree.set(tf.constant([0, 3, 4]), tf.constant([1.0, 2.0, 3.0]))
    path = tf.train.Checkpoint(tree=tree).save(str(tmp_path / "tree"))
    restored = SumTree(5)
    tf.train.Checkpoint(tree=restored).restore(path).assert_consumed()
    np.testing.assert_array_equal(restored.nodes.numpy(), tree.nodes.numpy())
