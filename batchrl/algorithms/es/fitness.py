"""Fitness shaping of evolution strategies: centered ranks (Salimans et al. 2017)."""

from __future__ import annotations

import tensorflow as tf


def centered_ranks(fitness: tf.Tensor) -> tf.Tensor:
    """Ranks of all values mapped linearly onto [-0.5, 0.5] (Salimans et al. 2017).

    For n values x_1..x_n, rank_i = #{j : x_j < x_i} + (#{j : x_j = x_i} - 1) / 2, so
    that the smallest value has rank 0 and the largest n - 1, and the result is

        u_i = rank_i / (n - 1) - 0.5                 (u_i = 0 when n = 1)

    Ties: tied values share the mean of the ranks they occupy (scipy's `rankdata(method=
    'average')`), so equal returns get equal utilities; OpenAI's `compute_ranks` breaks
    ties by position instead, which would favour whichever member came first. A pair of
    mirrored members with equal returns therefore contributes nothing to the gradient.
    The utilities sum to zero. O(n^2) comparisons: fine for populations of thousands.

    Args:
      fitness: float [n], the returns of all 2N members.

    Returns:
      float32 [n] in [-0.5, 0.5].
    """
    x = tf.cast(tf.convert_to_tensor(fitness), tf.float32)  # [n]
    below = tf.reduce_sum(tf.cast(x[None, :] < x[:, None], tf.float32), 1)  # [n]
    equal = tf.reduce_sum(tf.cast(x[None, :] == x[:, None], tf.float32), 1)  # [n]
    rank = below + (equal - 1.0) / 2.0  # [n]
    n = tf.cast(tf.size(x), tf.float32)
    return tf.math.divide_no_nan(rank, n - 1.0) - tf.where(n > 1.0, 0.5, 0.0)


def separate_ranks(fitness_plus: tf.Tensor, fitness_minus: tf.Tensor) -> tf.Tensor:
    """The routing paper's shaping: +eps and -eps returns ranked apart, each into [-0.5, 0.5].

    Güemes-Palau et al. (digital-twin routing with ES) apply `centered_ranks` to the N
    returns of theta + sigma eps_i and, separately, to the N returns of theta - sigma eps_i:

        u+ = centered_ranks(F+),   u- = centered_ranks(F-)

    Args:
      fitness_plus: float [N], returns of the members theta + sigma eps_i.
      fitness_minus: float [N], returns of the members theta - sigma eps_i.

    Returns:
      float32 [2N]: u+ followed by u-, in the population's member order.
    """
    return tf.concat([centered_ranks(fitness_plus), centered_ranks(fitness_minus)], 0)


def shape_fitness(fitness: tf.Tensor, method: str) -> tf.Tensor:
    """Shaped fitness [2N] of the returns [2N] = (F+ [N], F- [N]) by `method`.

    Args:
      fitness: float [2N], the +eps members first, then the -eps members.
      method: 'centered_ranks' (over all 2N), 'separate_ranks' (each half apart) or
        'raw' (the returns as they are, as float32).
    """
    fitness = tf.cast(tf.convert_to_tensor(fitness), tf.float32)
    if method == "centered_ranks":
        return centered_ranks(fitness)
    if method == "separate_ranks":
        plus, minus = tf.split(fitness, 2)
        return separate_ranks(plus, minus)
    if method == "raw":
        return fitness
    raise ValueError(f"Unknown fitness shaping {method!r}.")
