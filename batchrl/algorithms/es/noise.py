"""The members' noise, drawn anew from (seed, generation, pair) by every process alike."""

from __future__ import annotations

import tensorflow as tf

# Philox, named rather than 'auto_select', so that every device and process draws the same.
_ALG = "philox"


def member_seed(seed: int, generation, pair) -> tf.Tensor:
    """The stateless seed [2] of noise vector `pair` of `generation`: fold_in(fold_in(seed)).

    Keyed by three integers, the noise needs no table and no communication: a worker that
    knows the run's seed, the generation and a pair index regenerates the same eps.
    """
    key = tf.stack([tf.constant(seed % 2**31, tf.int64), tf.constant(0, tf.int64)])
    key = tf.random.experimental.stateless_fold_in(key, tf.cast(generation, tf.int64), alg=_ALG)
    return tf.random.experimental.stateless_fold_in(key, tf.cast(pair, tf.int64), alg=_ALG)


def member_noise(seed: int, generation, pairs: tf.Tensor, size: int) -> tf.Tensor:
    """The noise eps [K, size] ~ N(0, I) of `pairs` [K] of `generation`.

    `tf.random.stateless_normal` (Philox) from `member_seed`. We chose stateless ops over
    OpenAI's shared noise table (250M floats, 1 GB per machine, indexed by a random
    offset): nothing to allocate or ship to workers, no correlation between members whose
    table slices overlap, and any number of parameters. Generating D normals per member
    costs about as much as reading them from a table on CPU. TensorFlow's XLA kernels
    draw different numbers than its eager and graph kernels, so noise is drawn outside
    XLA (`ask` and `tell` are plain `tf.function`s) for every process to agree.

    Args:
      seed: the run's seed.
      generation: int, the generation number.
      pairs: int [K], indices of mirrored pairs in [0, N).
      size: D, the number of parameters.

    Returns:
      float32 [K, size].
    """
    pairs = tf.cast(tf.convert_to_tensor(pairs), tf.int64)

    def draw(pair):
        return tf.random.stateless_normal([size], member_seed(seed, generation, pair), alg=_ALG)

    return tf.map_fn(draw, pairs, fn_output_signature=tf.TensorSpec([size], tf.float32))
