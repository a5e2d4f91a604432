"""gSDE's rule for each environment's exploration matrix (Raffin et al. 2022), shared by
PPO and its population; the distribution itself is `networks.StateDependentNoiseHead`."""

from __future__ import annotations

import tensorflow as tf


def hold_noise(
    held: tf.Tensor, fresh: tf.Tensor, age: tf.Tensor, every: int, rollout_start
) -> tuple[tf.Tensor, tf.Tensor]:
    """gSDE's exploration matrices for one step, and each environment's age after it.

    An environment takes a fresh matrix at its first step (age 0), after acting `every`
    times with the one it holds, and at a rollout's start (Raffin et al. 2022, as
    Stable-Baselines3's `sde_sample_freq` and `reset_noise` at each rollout):

        redraw = age == 0 or age >= every or rollout_start
        noise = fresh if redraw else held;  age <- 1 if redraw else age + 1

    Args:
      held: the matrices held [..., L, A].
      fresh: newly drawn matrices, the shape of `held`.
      age: steps acted with the held matrix [...], int32.
      every: steps a matrix is held for (`ppo.gsde_every`).
      rollout_start: a bool scalar or [...] that forces a redraw.

    Returns:
      The matrices to act with [..., L, A] and the ages after this step [...].
    """
    redraw = tf.logical_or(tf.equal(age, 0), age >= every)
    redraw = tf.logical_or(redraw, rollout_start)
    noise = tf.where(redraw[..., None, None], fresh, held)
    return noise, tf.where(redraw, 1, age + 1)
