"""DQN's exploration: epsilon falling linearly over a share of the run."""

from __future__ import annotations

import tensorflow as tf


def linear_epsilon(
    step: tf.Tensor, total_steps: int, fraction: float, initial: float, final: float
) -> tf.Tensor:
    """Epsilon of epsilon-greedy, linear from `initial` to `final` over a fraction of a run.

        epsilon(t) = initial + (final - initial) * min(t / (fraction * total_steps), 1)

    (Stable-Baselines3's `exploration_fraction`; fraction 0 gives `final` from the start.)

    Args:
      step: environment steps so far, a scalar.
      total_steps: the run's environment steps.
      fraction: of `total_steps` over which epsilon falls.
      initial, final: epsilon at the start and from the end of the fall.

    Returns:
      A float32 scalar.
    """
    span = fraction * total_steps
    if span <= 0:
        return tf.constant(final, tf.float32)
    progress = tf.minimum(tf.cast(step, tf.float32) / span, 1.0)
    return initial + (final - initial) * progress
