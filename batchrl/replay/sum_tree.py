"""A sum tree in a TensorFlow variable: set leaves and find prefix sums in O(log n)."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf


class SumTree(tf.Module):
    """Non-negative values at `capacity` leaves, each inner node the sum of its children.

    The nodes live in one float32 variable of 2P entries, P the capacity rounded up to a
    power of two: the root at 1, the children of node i at 2i and 2i + 1, the leaves at
    [P, 2P) (node 0 is unused). Leaves from `capacity` to P stay 0.

        tree = SumTree(capacity)
        tree.set(indices, values)                  # [K], [K]
        leaves = tree.find(u * tree.total())       # u [N] in [0, 1): leaf i with
                                                   # probability values[i] / total

    Every method is static shapes and TensorFlow ops (eager, `tf.function`, XLA); the
    tree survives `tf.train.Checkpoint`. Parents are recomputed from their children on
    each `set`, never updated by differences, so rounding does not accumulate.
    """

    def __init__(self, capacity: int, name: str = "sum_tree"):
        """Creates a tree of zeros.

        Args:
          capacity: the number of leaves, at least 1.
          name: name of the module.
        """
        super().__init__(name=name)
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = int(capacity)
        self.depth = (self.capacity - 1).bit_length()  # levels below the root
        self.leaves = 2**self.depth  # P
        with self.name_scope:
            self.nodes = tf.Variable(tf.zeros([2 * self.leaves]), trainable=False, name="nodes")

    def set(self, indices: tf.Tensor, values: tf.Tensor) -> None:
        """Writes `values` at the leaves `indices`, then the sums above them, level by level.

        When an index appears more than once, the last of its writes wins, as in a
        sequence of single writes.

        Args:
          indices: int32 [K], K >= 1, leaves in [0, capacity).
          values: float32 [K], non-negative.
        """
        indices = as_indices(indices)  # [K]
        values = _last_writes(indices, tf.convert_to_tensor(values, tf.float32))  # [K]
        node = indices + self.leaves  # [K]
        self.nodes.scatter_nd_update(node[:, None], values)
        for _ in range(self.depth):
            # Duplicated parents all write the same sum of the level below, already written.
            node //= 2
            sums = tf.gather(self.nodes, 2 * node) + tf.gather(self.nodes, 2 * node + 1)  # [K]
            self.nodes.scatter_nd_update(node[:, None], sums)

    def get(self, indices: tf.Tensor) -> tf.Tensor:
        """The values [K] at the leaves `indices` [K]."""
        return tf.gather(self.nodes, as_indices(indices) + self.leaves)

    def total(self) -> tf.Tensor:
        """The sum of all leaves, a float32 scalar."""
        return self.nodes[1]

    def find(self, prefix_sums: tf.Tensor) -> tf.Tensor:
        """The leaf whose span of the cumulative sum holds each value.

        For a value v in [0, total), the leaf i with sum(values[:i]) <= v < sum(values[:i+1]),
        np.searchsorted(np.cumsum(values), v, side="right"): so a leaf of value 0 is never
        found. The descent goes left when v < the left child's sum, else subtracts that sum
        and goes right. Float rounding can leave v at or above a node's sum (a v drawn just
        below the total, or the sums of a subtree rounded differently from its parent):
        the plain rule would then walk into a subtree of zeros and return a leaf of value
        0, possibly one past the filled ones. So the descent never enters a child whose
        sum is 0 while its sibling's is positive: such a v ends at the last positive leaf
        of the subtree, the nearest valid answer. An empty tree finds leaf 0.

        Args:
          prefix_sums: float32 [N], values in [0, total()).

        Returns:
          int32 [N], leaves in [0, capacity).
        """
        value = tf.convert_to_tensor(prefix_sums, tf.float32)  # [N]
        node = tf.ones_like(value, tf.int32)  # [N], the root
        for _ in range(self.depth):
            left = 2 * node  # [N]
            left_sum = tf.gather(self.nodes, left)  # [N]
            right_sum = tf.gather(self.nodes, left + 1)  # [N]
            right = (right_sum > 0) & ((value >= left_sum) | (left_sum <= 0))  # [N]
            value = tf.where(right, value - left_sum, value)
            node = tf.where(right, left + 1, left)
        # Padding leaves hold 0 and are never entered; the clip only makes that explicit.
        return tf.minimum(node - self.leaves, self.capacity - 1)


def as_indices(indices: Any, name: str = "indices") -> tf.Tensor:
    """`indices` of any integer dtype (int32, int64, NumPy's default int, ...) as int32.

    Raises:
      TypeError: `indices` are not integers; the message names their dtype.
    """
    if not isinstance(indices, tf.Tensor | tf.Variable):
        indices = np.asarray(indices)
        if indices.dtype.kind not in "iu":  # An empty list is float64 to NumPy.
            indices = indices.astype(np.int32) if indices.size == 0 else indices
    dtype = tf.as_dtype(indices.dtype)
    if not dtype.is_integer:
        raise TypeError(f"{name} must be of an integer dtype, got {dtype.name}")
    return tf.cast(indices, tf.int32)


def _last_writes(indices: tf.Tensor, values: tf.Tensor) -> tf.Tensor:
    """`values` [K] where each entry is replaced by the last one written to its index.

    A scatter applies duplicated indices in no defined order; after this, every write to
    an index carries the same value, so the order does not matter. Sorting groups equal
    indices, and the largest position in a group is its last write: O(K log K).
    """
    count = indices.shape[0] if indices.shape[0] is not None else tf.shape(indices)[0]
    order = tf.argsort(indices)  # [K], positions sorted by index
    ordered = tf.gather(indices, order)  # [K]
    first = tf.concat([[True], ordered[1:] != ordered[:-1]], 0)  # [K], starts a group
    group = tf.cumsum(tf.cast(first, tf.int32)) - 1  # [K], sorted order
    last = tf.math.unsorted_segment_max(order, group, count)  # [groups], padded to K
    winner = tf.scatter_nd(order[:, None], tf.gather(last, group), tf.shape(order))  # [K]
    return tf.gather(values, winner)
