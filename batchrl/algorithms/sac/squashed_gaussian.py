"""The tanh-squashed Gaussian policy of SAC (Haarnoja et al. 2018, appendix C) and the
action bounds it maps to."""

from __future__ import annotations

import math

import tensorflow as tf
import tensorflow_probability as tfp

tfd = tfp.distributions


def normal_from_uniforms(u1: tf.Tensor, u2: tf.Tensor) -> tf.Tensor:
    """Standard normal numbers from pairs of uniform ones (Box and Muller 1958).

        z = sqrt(-2 log(1 - u1)) cos(2 pi u2)

    1 - u1 lies in (0, 1] for u1 in [0, 1), so the log is finite. The uniforms come from
    a `batchrl.replay.RandomStream`, whose bits are the same eagerly, in a graph and
    under XLA; log, sqrt and cos may still round differently under XLA (by an ulp).

    Args:
      u1, u2: float32 uniforms in [0, 1), of one shape.

    Returns:
      Standard normal numbers of that shape.
    """
    return tf.sqrt(-2.0 * tf.math.log1p(-u1)) * tf.cos((2.0 * math.pi) * u2)


def log_one_minus_tanh_square(u: tf.Tensor) -> tf.Tensor:
    """log(1 - tanh(u)^2), stable for large |u| (as TFP's Tanh bijector computes it).

        log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))

    which follows from 1 - tanh(u)^2 = 4 / (e^u + e^-u)^2.
    """
    return 2.0 * (math.log(2.0) - u - tf.nn.softplus(-2.0 * u))


def squashed_gaussian_log_prob(u: tf.Tensor, mean: tf.Tensor, log_std: tf.Tensor) -> tf.Tensor:
    """log pi(a|s) of a = tanh(u), u ~ N(mean, exp(log_std)^2) per dimension.

    Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications"
    (arXiv 1812.05905), Appendix C, "Enforcing Action Bounds":

        log pi(a|s) = sum_i [log N(u_i; mean_i, std_i) - log(1 - tanh(u_i)^2)]

    with the correction in the stable form of `log_one_minus_tanh_square`. This is the
    density of the action in [-1, 1]; scaling it to the space's bounds (`to_bounds`)
    does not enter it (Stable-Baselines3's choice; CleanRL subtracts log((high - low) / 2)
    per dimension as well).

    Args:
      u: [N, A] the pre-squash sample.
      mean: [N, A] the Gaussian's mean.
      log_std: [N, A] its log standard deviation.

    Returns:
      [N] log-probabilities.
    """
    gaussian = tfd.Normal(mean, tf.exp(log_std)).log_prob(u)  # [N, A]
    return tf.reduce_sum(gaussian - log_one_minus_tanh_square(u), axis=-1)


def to_bounds(squashed: tf.Tensor, low: tf.Tensor, high: tf.Tensor) -> tf.Tensor:
    """Maps actions in [-1, 1] to the space's [low, high]:

        action = (high + low) / 2 + a (high - low) / 2

    (= low + (a + 1) (high - low) / 2, written about the center so that symmetric bounds
    keep small actions exact in float32).
    """
    return 0.5 * (high + low) + squashed * (0.5 * (high - low))


def from_bounds(action: tf.Tensor, low: tf.Tensor, high: tf.Tensor) -> tf.Tensor:
    """Maps actions in [low, high] to [-1, 1], the inverse of `to_bounds`:

    a = (action - (high + low) / 2) / ((high - low) / 2)
    """
    return (action - 0.5 * (high + low)) / (0.5 * (high - low))
