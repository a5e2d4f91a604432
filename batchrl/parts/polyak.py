"""Polyak averaging of target networks toward their sources."""

from __future__ import annotations

import tensorflow as tf


def polyak(target: list[tf.Variable], source: list[tf.Variable], tau: float) -> list:
    """Moves each target variable toward its source: target <- (1 - tau) target + tau source.

    tau 1 copies (DQN's periodic target copies; Mnih et al. 2015); a small tau averages
    (Lillicrap et al. 2016; SAC). Returns the assign ops (an empty list for no variables).

    Raises:
      ValueError: the lists differ in length.
    """
    if len(target) != len(source):
        raise ValueError(f"{len(target)} target variables for {len(source)} source variables.")
    if tau == 1.0:
        return [t.assign(s) for t, s in zip(target, source)]
    return [t.assign((1.0 - tau) * t + tau * s) for t, s in zip(target, source)]
