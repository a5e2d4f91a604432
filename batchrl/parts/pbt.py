"""Population-based training's exploit and explore (perturb, resample) steps for M members."""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf


def exploit(
    scores: tf.Tensor, quantile: float, rng: tf.random.Generator
) -> tuple[tf.Tensor, tf.Tensor]:
    """Which member each member takes its state from: the bottom quantile copies the top.

    Population-based training (Jaderberg et al. 2017, https://arxiv.org/abs/1711.09846,
    "truncation selection"): with n = max(1, floor(quantile M)), each of the n members of
    the lowest scores takes the state of one of the n members of the highest scores,
    drawn uniformly; the others keep their own. NaN scores (never evaluated) rank lowest;
    ties keep the members' order.

    Args:
      scores: [M] float, higher is better (e.g. each member's latest evaluation return).
      quantile: the share of members replaced, in (0, 0.5].
      rng: draws the parents.

    Returns:
      `source` [M] int32, the member whose state member m takes (m itself if it keeps its
      own), and `copied` [M] bool, the members that take another's.
    """
    scores = tf.convert_to_tensor(scores, tf.float32)
    members = int(scores.shape[0])
    count = max(1, int(quantile * members))
    scores = tf.where(tf.math.is_nan(scores), -float("inf"), scores)
    order = tf.argsort(scores, stable=True)  # [M], the lowest first
    bottom, top = order[:count], order[members - count :]  # [n] each
    parents = tf.gather(top, rng.uniform([count], 0, count, tf.int32))  # [n]
    source = tf.tensor_scatter_nd_update(tf.range(members), bottom[:, None], parents)
    return source, source != tf.range(members)  # The bottom and the top are apart.


def perturb(
    values: tf.Tensor,
    copied: tf.Tensor,
    factors: Sequence[float],
    rng: tf.random.Generator,
    low: float = 0.0,
    high: float = float("inf"),
) -> tf.Tensor:
    """Explore: the copied members' values times a factor drawn uniformly from `factors`.

        value_m <- clip(value_m * f_m, low, high),  f_m ~ U(factors),  where copied_m

    (Jaderberg et al. 2017: perturb by 0.8 or 1.2.) The others keep their values.

    Args:
      values: [M] float, each member's setting (its parent's, after `exploit`).
      copied: [M] bool, from `exploit`.
      factors: the factors to draw from, e.g. (0.8, 1.2).
      rng: draws the factors.
      low, high: the setting's valid range, e.g. [0, 1] for a GAE lambda.

    Returns:
      The new values [M].
    """
    values = tf.convert_to_tensor(values, tf.float32)
    choice = rng.uniform(tf.shape(values), 0, len(factors), tf.int32)  # [M]
    factor = tf.gather(tf.constant(list(factors), tf.float32), choice)  # [M]
    new = tf.clip_by_value(values * factor, low, high)
    return tf.where(copied, new, values)


def resample(
    values: tf.Tensor,
    copied: tf.Tensor,
    choices: Sequence[float],
    probability: float,
    rng: tf.random.Generator,
    low: float = 0.0,
    high: float = float("inf"),
) -> tf.Tensor:
    """Explore by resampling: with `probability`, a copied member draws a value afresh.

        value_m <- clip(c_m, low, high),  c_m ~ U(choices),  where copied_m and u_m < p,
        u_m ~ U[0, 1)

    (Jaderberg et al. 2017, "resample": a new value from the prior the population's
    values were drawn from; here the values the config gave the members.) The other
    members keep their values: call it on `perturb`'s result to perturb or resample.

    Args:
      values: [M] float, each member's setting (e.g. after `perturb`).
      copied: [M] bool, from `exploit`.
      choices: the values to draw from, each equally likely, e.g. (1e-4, 3e-4, 1e-3).
      probability: the chance that a copied member resamples, in [0, 1].
      rng: draws the coins and the choices.
      low, high: the setting's valid range.

    Returns:
      The new values [M].
    """
    values = tf.convert_to_tensor(values, tf.float32)
    coin = rng.uniform(tf.shape(values)) < probability  # [M]
    choice = rng.uniform(tf.shape(values), 0, len(choices), tf.int32)  # [M]
    drawn = tf.gather(tf.constant(list(choices), tf.float32), choice)  # [M]
    new = tf.clip_by_value(drawn, low, high)
    return tf.where(copied & coin, new, values)
