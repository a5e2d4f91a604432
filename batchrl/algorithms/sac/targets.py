"""Critic targets: SAC's soft targets, TD3's smoothed target actions and clipped double Q
(Fujimoto et al. 2018)."""

from __future__ import annotations

import tensorflow as tf


def soft_q_targets(
    reward: tf.Tensor,
    discount: tf.Tensor,
    next_q1: tf.Tensor,
    next_q2: tf.Tensor,
    next_log_prob: tf.Tensor,
    alpha: tf.Tensor,
) -> tf.Tensor:
    """Soft Bellman targets of the twin critics (Haarnoja et al. 2018, Sections 4.2 and 6:
    the soft value of the next state under the smaller of two target critics, the clipped
    double Q of Fujimoto et al. 2018).

        y = r + discount * (min(Q1', Q2')(s', a') - alpha log pi(a'|s')),  a' ~ pi(.|s')

    `discount` carries gamma^n for n-step returns (`batchrl.replay.NStep`) and is 0 where
    the window ended in a terminal state.

    Args:
      reward: [N] (n-step) returns.
      discount: [N] the discount to the bootstrap state.
      next_q1, next_q2: [N] the target critics at (s', a').
      next_log_prob: [N] log pi(a'|s').
      alpha: the temperature, a scalar.

    Returns:
      [N] targets, with no gradient.
    """
    soft_value = tf.minimum(next_q1, next_q2) - alpha * next_log_prob  # [N]
    return tf.stop_gradient(reward + discount * soft_value)


def smoothed_target_actions(
    next_action: tf.Tensor, noise: tf.Tensor, noise_clip: float
) -> tf.Tensor:
    """TD3's target policy smoothing: the target actor's actions with clipped noise.

    Fujimoto, van Hoof, Meger 2018, "Addressing Function Approximation Error in
    Actor-Critic Methods" (TD3), eq. (15), in [-1, 1] action units:

        a' = clip(pi'(s') + clip(noise, -c, c), -1, 1),    noise ~ N(0, sigma~^2).

    Args:
      next_action: [N, A], pi'(s') in [-1, 1].
      noise: [N, A], already scaled by sigma~.
      noise_clip: c.

    Returns:
      [N, A], a' in [-1, 1].
    """
    clipped = tf.clip_by_value(noise, -noise_clip, noise_clip)
    return tf.clip_by_value(next_action + clipped, -1.0, 1.0)


def clipped_double_q_targets(
    reward: tf.Tensor, discount: tf.Tensor, next_q1: tf.Tensor, next_q2: tf.Tensor
) -> tf.Tensor:
    """TD3's clipped double-Q targets, y = r + discount * min(Q1'(s', a'), Q2'(s', a')).

    Fujimoto et al. 2018, eq. (10) (Algorithm 1); `discount` is gamma^n, 0 past a terminal
    state, as in `soft_q_targets`. All [N]; no gradient flows into the target.
    """
    return tf.stop_gradient(reward + discount * tf.minimum(next_q1, next_q2))
