"""Random permutations without a sort, for shuffling minibatches in a graph or under XLA.

`tf.argsort` of random keys is the usual shuffle, but XLA on CPU sorts with a compiled
comparator called once per comparison: a permutation of 2,048 rows costs about 0.4 ms,
and PPO's ten per `cartpole_tf` call were 10 to 20% of the call (docs/lab-log.md,
2026-11-25). Here a permutation is a keyed Feistel network, a bijection on the smallest
power of two at least `size` (TensorFlow's `RandomIndexShuffle` is built the same way,
but XLA cannot compile it). When `size` is not a power of two, the network maps 0, 1,
2, ... to distinct values, those below `size` are kept in that order, and a cumulative
sum packs them into `size` places. It is a few dozen elementwise ops, with the same
numbers in graph mode and under XLA.
"""

from __future__ import annotations

import tensorflow as tf

ROUNDS = 8  # Four left rows 1,024 apart together too rarely (tests/parts/test_permutations.py).
SMALLEST = 256  # Below, a sort is cheap, and a network over a few bits makes few orders.
_MULTIPLIER = 0x45D9F3B


def _shift(x: tf.Tensor, bits: int, left: bool = False) -> tf.Tensor:
    shift = tf.bitwise.left_shift if left else tf.bitwise.right_shift
    return shift(x, tf.constant(bits, tf.uint32))


def _mix(x: tf.Tensor) -> tf.Tensor:
    """A 32-bit integer hash (uint32: products wrap modulo 2**32)."""
    x = tf.bitwise.bitwise_xor(_shift(x, 16), x) * tf.constant(_MULTIPLIER, tf.uint32)
    return tf.bitwise.bitwise_xor(_shift(x, 16), x)


def feistel(values: tf.Tensor, keys: tf.Tensor, bits: int) -> tf.Tensor:
    """A bijection of [0, 2**bits) for each row of `keys` (bits <= 32).

    The halves may differ by a bit (an unbalanced network): each round maps (L, R) to
    (R, L ^ F(R)), which swaps their widths, and is undone by L = (L ^ F(R)) ^ F(R).

    Args:
      values: uint32 [count, n] or [1, n], each below 2**bits.
      keys: uint32 [count, rounds], one key per round.
    """
    high, low = bits - bits // 2, bits // 2  # The widths of L and R.
    left = _shift(values, low)
    right = tf.bitwise.bitwise_and(values, tf.constant((1 << low) - 1, tf.uint32))
    for round_ in range(keys.shape[-1]):
        mixed = _mix(tf.bitwise.bitwise_xor(right, keys[:, round_ : round_ + 1]))
        mixed = tf.bitwise.bitwise_and(mixed, tf.constant((1 << high) - 1, tf.uint32))
        left, right = right, tf.bitwise.bitwise_xor(left, mixed)
        high, low = low, high
    return tf.bitwise.bitwise_or(_shift(left, low, left=True), right)


def random_permutations(rng: tf.random.Generator, count: int, size: int) -> tf.Tensor:
    """`count` pseudo-random permutations of range(`size`): int32 [count, size].

    Sizes below SMALLEST sort `count` x `size` uniform keys; larger ones draw `count` x
    ROUNDS keys for the network. Either way `rng` advances by one draw.
    """
    if not isinstance(size, int) or not 1 <= size <= 2**31:
        raise ValueError(f"size must be a Python int in [1, 2**31], got {size!r}")
    if size < SMALLEST:
        return tf.argsort(rng.uniform([count, size]), axis=-1)
    bits = (size - 1).bit_length()  # 2**bits >= size, below 2 * size.
    keys = rng.uniform([count, ROUNDS], minval=0, maxval=1 << 32, dtype=tf.int64)
    domain = tf.cast(tf.range(1 << bits), tf.uint32)[None]
    values = tf.cast(feistel(domain, tf.cast(keys, tf.uint32), bits), tf.int32)
    if size == 1 << bits:
        return tf.broadcast_to(values, [count, size])
    # Keep the values below `size` in their order, packed by a cumulative sum.
    keep = values < size  # Exactly `size` per row: the network is a bijection.
    place = tf.where(keep, tf.cumsum(tf.cast(keep, tf.int32), axis=1) - 1, size)
    rows = tf.broadcast_to(tf.range(count)[:, None], tf.shape(place))
    values = tf.where(keep, values, 0)  # The rest go to a spare column; scatter_nd adds them.
    packed = tf.scatter_nd(tf.stack([rows, place], axis=-1), values, [count, size + 1])
    return packed[:, :size]
