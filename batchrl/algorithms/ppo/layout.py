"""The layouts of a population's tensors: member-major agents [M B] and a member axis [M]."""

from __future__ import annotations

import tensorflow as tf

# The environments' agents are member-major: agent m B + b is member m's b-th. Members'
# networks and normalizers take a leading member axis [M, B, ...] or [B, M, ...].


def flat(x: tf.Tensor) -> tf.Tensor:
    """[M, N, ...] -> [M N, ...]."""
    return tf.reshape(x, [-1, *x.shape[2:]])


def by_member(x: tf.Tensor, members: int) -> tf.Tensor:
    """[M N, ...] -> [M, N, ...]."""
    return tf.reshape(x, [members, -1, *x.shape[1:]])


def by_agent(x: tf.Tensor, members: int) -> tf.Tensor:
    """[M N, ...] -> [N, M, ...]: the layout of the normalizers' statistics [M, ...]."""
    x = by_member(x, members)
    return tf.transpose(x, [1, 0, *range(2, x.shape.rank)])


def to_members(x: tf.Tensor, members: int, batch_size: int) -> tf.Tensor:
    """Time-major [T, M B, ...] -> member-major [M, T B, ...] (rows t B + b, as PPO's)."""
    steps, rest = x.shape[0], x.shape[2:]
    x = tf.reshape(x, [steps, members, batch_size, *rest])
    x = tf.transpose(x, [1, 0, 2, *range(3, x.shape.rank)])
    return tf.reshape(x, [members, steps * batch_size, *rest])


def to_time(x: tf.Tensor, members: int, batch_size: int) -> tf.Tensor:
    """Member-major [M, T B] -> time-major [T, M B]."""
    x = tf.reshape(x, [members, -1, batch_size])
    return tf.reshape(tf.transpose(x, [1, 0, 2]), [-1, members * batch_size])
