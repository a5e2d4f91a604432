"""SAC's losses: the critics', the actor's and the temperature's (Haarnoja et al. 2018)."""

from __future__ import annotations

import tensorflow as tf


def critic_loss(q1: tf.Tensor, q2: tf.Tensor, target: tf.Tensor) -> tf.Tensor:
    """The twin critics' loss: Haarnoja et al. 2018's J_Q (Section 4.2), 0.5 times the
    squared error, for each critic, summed (Stable-Baselines3's form):

        J_Q = 0.5 * mean((Q1(s, a) - y)^2) + 0.5 * mean((Q2(s, a) - y)^2)

    Args:
      q1, q2: [N] the critics at the replayed (s, a).
      target: [N] y, from `soft_q_targets`.

    Returns:
      A scalar.
    """
    return 0.5 * (tf.reduce_mean(tf.square(q1 - target)) + tf.reduce_mean(tf.square(q2 - target)))


def actor_loss(log_prob: tf.Tensor, q1: tf.Tensor, q2: tf.Tensor, alpha: tf.Tensor) -> tf.Tensor:
    """The policy's loss (Haarnoja et al. 2018, J_pi of Section 4.2, reparameterized, with
    the smaller of the two critics):

        J_pi = mean(alpha log pi(a|s) - min(Q1, Q2)(s, a)),  a = tanh(mean + std * z)

    Args:
      log_prob: [N] log pi(a|s) of reparameterized actions a.
      q1, q2: [N] the critics at (s, a).
      alpha: the temperature, a scalar (no gradient reaches it here).

    Returns:
      A scalar.
    """
    return tf.reduce_mean(tf.stop_gradient(alpha) * log_prob - tf.minimum(q1, q2))


def temperature_loss(log_alpha: tf.Tensor, log_prob: tf.Tensor, target_entropy: float) -> tf.Tensor:
    """The temperature's loss (Haarnoja et al. 2018, Section 5, eq. 18), of log alpha:

        J(alpha) = -mean(log_alpha * (log pi(a|s) + target_entropy))

    Its gradient lowers alpha while the policy's entropy -log pi is above the target and
    raises it below. Learning log alpha rather than alpha keeps alpha positive
    (Stable-Baselines3 and softlearning do the same).

    Args:
      log_alpha: the scalar variable (or tensor) learned.
      log_prob: [N] log pi(a|s) of actions sampled at replayed states; no gradient.
      target_entropy: the entropy aimed at, e.g. -|A|.

    Returns:
      A scalar.
    """
    return -tf.reduce_mean(log_alpha * tf.stop_gradient(log_prob + target_entropy))
