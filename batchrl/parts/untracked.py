"""Variables that `tf.Module` and `tf.train.Checkpoint` do not track."""

from __future__ import annotations

import tensorflow as tf


class Untracked:
    """Holds variables where `tf.Module` and `tf.train.Checkpoint` do not look.

    For state that is rebuilt from the config at construction (a seed, a population's
    settings, constants too) or that only reports (the latest summaries): a checkpoint
    without it still restores exactly.
    """

    def __init__(self, variables: dict[str, tf.Variable | tf.Tensor]):
        self.variables = variables
