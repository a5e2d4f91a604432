"""DQN's targets and TD loss: one-step and double-DQN targets (van Hasselt et al. 2016),
and the Huber loss."""

from __future__ import annotations

import tensorflow as tf


def double_q_targets(
    reward: tf.Tensor, discount: tf.Tensor, next_q_online: tf.Tensor, next_q_target: tf.Tensor
) -> tf.Tensor:
    """Double-DQN targets (van Hasselt et al. 2016, eq. 4), n-step when `reward` sums n.

        y = r + discount * Q_target(s', argmax_a Q_online(s', a))

    The online network chooses the action and the target network values it. `discount`
    carries gamma^n and is 0 where the window ended in a terminal state.

    Args:
      reward: [N] (n-step) returns.
      discount: [N] the discount to the bootstrap state: gamma^m, or 0 after termination.
      next_q_online: [N, A] the online network's Q values at the bootstrap state.
      next_q_target: [N, A] the target network's Q values there.

    Returns:
      [N] targets, with no gradient.
    """
    action = tf.argmax(next_q_online, axis=1, output_type=tf.int32)  # [N]
    value = tf.gather(next_q_target, action, batch_dims=1)  # [N]
    return tf.stop_gradient(reward + discount * value)


def q_targets(reward: tf.Tensor, discount: tf.Tensor, next_q_target: tf.Tensor) -> tf.Tensor:
    """DQN targets (Mnih et al. 2015): y = r + discount * max_a Q_target(s', a); [N]."""
    return tf.stop_gradient(reward + discount * tf.reduce_max(next_q_target, axis=1))


def huber(error: tf.Tensor, delta: float = 1.0) -> tf.Tensor:
    """The Huber loss of each error (Mnih et al. 2015's error clipping).

        huber(x) = x^2 / 2                 if |x| <= delta
                   delta (|x| - delta / 2) otherwise

    Args:
      error: [N] errors, e.g. TD errors y - Q(s, a).
      delta: where the loss turns from quadratic to linear.

    Returns:
      [N] losses.
    """
    magnitude = tf.abs(error)
    quadratic = tf.minimum(magnitude, delta)
    return 0.5 * tf.square(quadratic) + delta * (magnitude - quadratic)
