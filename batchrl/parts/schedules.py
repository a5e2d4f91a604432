"""Learning-rate schedules over the steps (or generations) of a run."""

from __future__ import annotations

import tensorflow as tf

SCHEDULES = ("constant", "linear")


def learning_rate(
    rate: float | tuple[float, ...],
    schedule: str,
    step: tf.Variable | None,
    total_steps: int,
    final: float = 0.0,
) -> tf.Tensor:
    """The learning rate at step `step`.

        constant: rate
        linear:   final + (rate - final) * max(1 - step / total_steps, 0)
                  (from rate to final at total_steps, final after)

    Args:
      rate: the initial rate; or rates, one for each member of a population.
      schedule: 'constant' or 'linear'.
      step: int variable counting steps (PPO and IMPALA: environment steps; ES:
        generations); None keeps the rate constant.
      total_steps: the step where the linear schedule reaches `final` (PPO and IMPALA:
        the run's `train.total_steps`).
      final: the rate at and after `total_steps` (0: to zero at the end of the run).

    Returns:
      The rate, a float32 scalar (or [M] for rates).
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"Unknown schedule {schedule!r}; valid choices are {list(SCHEDULES)}.")
    rate = tf.constant(rate, tf.float32)
    if schedule == "linear" and step is not None:
        progress = tf.cast(step, tf.float32) / float(total_steps)
        rate = final + (rate - final) * tf.maximum(1.0 - progress, 0.0)
    return rate
