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


class MemberLayout:
    """The reshapes above for a population of `members` members of `batch_size` agents."""

    def __init__(self, members: int, batch_size: int):
        self.members, self.batch_size = members, batch_size

    def by_member(self, x: tf.Tensor) -> tf.Tensor:
        return by_member(x, self.members)  # [M, N, ...]

    def by_agent(self, x: tf.Tensor) -> tf.Tensor:
        return by_agent(x, self.members)  # [N, M, ...]

    def to_members(self, x: tf.Tensor) -> tf.Tensor:
        return to_members(x, self.members, self.batch_size)  # [M, T B, ...]

    def to_time(self, x: tf.Tensor) -> tf.Tensor:
        return to_time(x, self.members, self.batch_size)  # [T, M B]

    def by_column(self, value):
        """A member setting [M] as one value per column [M B] of a rollout; a float as is."""
        if isinstance(value, tf.Tensor):
            return tf.repeat(value, self.batch_size)
        return value
