"""Learning-rate schedules over the environment steps of a run."""

from __future__ import annotations

import tensorflow as tf

SCHEDULES = ("constant", "linear")


def learning_rate(
    rate: float, schedule: str, step: tf.Variable | None, total_steps: int
) -> tf.Tensor:
    """The learning rate at environment step `step`.

        constant: rate
        linear:   rate * max(1 - step / total_steps, 0)     (to zero at the end of the run)

    Args:
      rate: the initial rate.
      schedule: 'constant' or 'linear'.
      step: int variable counting environment steps; None keeps the rate constant.
      total_steps: the run's `train.total_steps`.

    Returns:
      The rate, a float32 scalar.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"Unknown schedule {schedule!r}; valid choices are {list(SCHEDULES)}.")
    rate = tf.constant(rate, tf.float32)
    if schedule == "linear" and step is not None:
        progress = tf.cast(step, tf.float32) / float(total_steps)
        rate = rate * tf.maximum(1.0 - progress, 0.0)
    return rate
