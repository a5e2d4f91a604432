"""Items of one nested spec in a ring of variables, where each write overwrites the oldest."""

from __future__ import annotations

import functools
from typing import Any

import tensorflow as tf


class Ring(tf.Module):
    """`capacity` items, one variable [capacity, ...] per leaf of their spec.

        ring = Ring(capacity, {"observ": tf.TensorSpec([3], tf.uint8), ...})
        indices = ring.write(items)                # {"observ": [K, 3], ...} -> [K]
        items = ring.read(indices)                 # [N] -> {"observ": [N, 3], ...}

    Writes go to the slots after the last write, wrapping around; `size` counts the
    filled slots, up to `capacity`. Leaves keep their dtype (uint8 frames stay uint8).
    The items, the write head and the size survive `tf.train.Checkpoint`.
    """

    def __init__(self, capacity: int, spec: Any, name: str = "ring"):
        """Creates a ring of zeros.

        Args:
          capacity: the number of items held, at least 1.
          spec: a nested structure (dicts, tuples) of fully defined `tf.TensorSpec`, one item.
          name: name of the module.
        """
        super().__init__(name=name)
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = int(capacity)
        # A function keeps the nesting: tf.Module would wrap a nested spec kept as an
        # attribute in its tracking types, and items packed like it would be wrapped too.
        self._pack = functools.partial(tf.nest.pack_sequence_as, spec)
        with self.name_scope:
            self.leaves = [
                _zeros(f"leaf{i}", leaf, self.capacity)
                for i, leaf in enumerate(tf.nest.flatten(spec))
            ]  # in the order of tf.nest.flatten
            self._head = tf.Variable(0, trainable=False, name="head")
            self._size = tf.Variable(0, trainable=False, name="size")

    @property
    def spec(self) -> Any:
        """The spec of one item."""
        return self._pack([tf.TensorSpec(leaf.shape[1:], leaf.dtype) for leaf in self.leaves])

    def size(self) -> tf.Tensor:
        """The number of items held, an int32 scalar in [0, capacity]."""
        return self._size.read_value()

    def write(self, items: Any) -> tf.Tensor:
        """Writes K items at the next K slots, one scatter per leaf.

        Args:
          items: the spec's structure, each leaf [K, ...] with K static, 1 <= K <= capacity.

        Returns:
          int32 [K], the slots written.

        Raises:
          ValueError: if the structure, a shape or K does not fit.
        """
        tf.nest.assert_same_structure(self.spec, items, check_types=False)
        values = [
            tf.convert_to_tensor(value, leaf.dtype)
            for value, leaf in zip(tf.nest.flatten(items), self.leaves)
        ]
        count = values[0].shape[0]
        for value, leaf in zip(values, self.leaves):
            if value.shape[:1] != [count] or not value.shape[1:].is_compatible_with(leaf.shape[1:]):
                raise ValueError(f"{leaf.name}: expected [K, *{leaf.shape[1:]}], got {value.shape}")
        if count is None or not 1 <= count <= self.capacity:
            raise ValueError(f"K must be static and in [1, {self.capacity}], got {count}")
        indices = (self._head + tf.range(count)) % self.capacity  # [K]
        for value, leaf in zip(values, self.leaves):
            leaf.scatter_nd_update(indices[:, None], value)
        self._head.assign((self._head + count) % self.capacity)
        self._size.assign(tf.minimum(self._size + count, self.capacity))
        return indices

    def read(self, indices: tf.Tensor) -> Any:
        """The items at `indices` [N]: the spec's structure, each leaf [N, ...]."""
        return self._pack([tf.gather(leaf, indices) for leaf in self.leaves])


def _zeros(name: str, spec: tf.TensorSpec, capacity: int) -> tf.Variable:
    if not spec.shape.is_fully_defined():
        raise ValueError(f"{name}: the spec's shape must be fully defined, got {spec.shape}")
    zeros = tf.zeros([capacity, *spec.shape], spec.dtype)  # [capacity, ...]
    return tf.Variable(zeros, trainable=False, name=name)
