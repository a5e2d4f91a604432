"""Exports a trained policy as a TensorFlow SavedModel that needs no batchrl to run."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import gymnasium as gym
import tensorflow as tf


class _Policy(tf.Module):
    def __init__(self, algo, observation_space: gym.spaces.Box):
        super().__init__(name="policy")
        self._algo = algo
        signature = tf.TensorSpec((None,) + tuple(observation_space.shape), tf.float32, "observ")
        self.__call__ = tf.function(self._act, input_signature=[signature])

    def _act(self, observ):
        return self._algo.act(observ, deterministic=True)


def export_policy(algo, observation_space: gym.spaces.Box, path: str | Path) -> Path:
    """Saves `algo.act(observ, deterministic=True)` as a SavedModel at `path`.

    The model maps float32 observations [N, ...] to environment actions [N, ...], with
    observation normalization included. Load it with `tf.saved_model.load(path)` and call
    it on a batch of observations. The folder is replaced atomically.

    Args:
      algo: an algorithm with an `act(observ, deterministic)` method, such as `PPO`.
      observation_space: the Box space of one observation.
      path: the SavedModel folder to write.

    Returns:
      The path.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=path.name + ".", dir=path.parent))
    try:
        tf.saved_model.save(_Policy(algo, observation_space), str(staging))
        if path.exists():
            old = path.with_name(path.name + ".old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(staging, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return path
