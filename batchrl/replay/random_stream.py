"""Uniform numbers from a seed and a draw count: reproducible, checkpointed, same under XLA."""

from __future__ import annotations

import tensorflow as tf


class RandomStream(tf.Module):
    """Draws of uniform numbers in [0, 1), each seeded with (`seed`, draws so far).

    `tf.random.stateless_uniform` gives the same bits for the same seed eagerly, in a
    graph and under XLA, but (TensorFlow 2.21, CPU) XLA turns them into other floats than
    the kernels do. So a draw takes the bits and scales their top 24 (float32) or 53
    (float64) bits by 2^-24 or 2^-53: exact, and the same everywhere. The count is a
    variable: a restored stream goes on with the draws the saved one would have made.
    """

    def __init__(self, seed: int, name: str = "random_stream"):
        """Starts a stream.

        Args:
          seed: a Python int; part of the configuration, not of a checkpoint.
          name: name of the module.
        """
        super().__init__(name=name)
        self.seed = int(seed)
        with self.name_scope:
            self.draws = tf.Variable(tf.constant(0, tf.int64), trainable=False, name="draws")

    def uniform(self, shape: list[int], dtype: tf.DType = tf.float32) -> tf.Tensor:
        """The next draw of independent uniform numbers in [0, 1).

        Args:
          shape: a static shape.
          dtype: tf.float32 or tf.float64.

        Returns:
          A tensor of `shape` and `dtype`.
        """
        seed = tf.stack([tf.constant(self.seed, tf.int64), self.draws.assign_add(1)])
        bits, kept = (tf.uint32, 24) if dtype == tf.float32 else (tf.uint64, 53)
        value = tf.random.stateless_uniform(
            shape, seed, minval=None, maxval=None, dtype=bits, alg="philox"
        )
        value = tf.bitwise.right_shift(value, tf.constant(bits.size * 8 - kept, bits))
        return tf.cast(value, dtype) * 2.0**-kept
