"""Exports a trained policy as a TensorFlow SavedModel that needs no batchrl to run."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import gymnasium as gym
import tensorflow as tf

from batchrl.tools.in_graph_env import observ_dtype

METADATA = "batchrl.json"  # Beside the SavedModel: what the run knew of the policy.


class _Policy(tf.Module):
    def __init__(self, algo, observation_space: gym.spaces.Box):
        super().__init__(name="policy")
        self._algo = algo
        dtype = observ_dtype(observation_space)
        signature = tf.TensorSpec((None,) + tuple(observation_space.shape), dtype, "observ")
        autograph = bool(getattr(algo, "autograph", True))
        self.__call__ = tf.function(self._act, input_signature=[signature], autograph=autograph)

    def _act(self, observ):
        return self._algo.act(observ, deterministic=True)


class _RecurrentPolicy(tf.Module):
    def __init__(self, algo, observation_space: gym.spaces.Box):
        super().__init__(name="policy")
        self._algo = algo
        dtype = observ_dtype(observation_space)
        observ = tf.TensorSpec((None,) + tuple(observation_space.shape), dtype, "observ")
        state_size = algo.initial_state(1).shape[-1]
        state = tf.TensorSpec((None, state_size), tf.float32, "state")
        size = tf.TensorSpec((), tf.int32, "batch_size")
        autograph = bool(getattr(algo, "autograph", True))
        self.__call__ = tf.function(self._act, input_signature=[observ, state], autograph=autograph)
        self.initial_state = tf.function(
            algo.initial_state, input_signature=[size], autograph=autograph
        )
        reward = tf.TensorSpec((None,), tf.float32, "reward")
        self.observe_reward = tf.function(
            algo.observe_reward, input_signature=[state, reward], autograph=autograph
        )

    def _act(self, observ, state):
        action, state = self._algo.act_recurrent(observ, state, deterministic=True)
        return {"action": action, "state": state}


def export_policy(
    algo, observation_space: gym.spaces.Box, path: str | Path, metadata: dict | None = None
) -> Path:
    """Saves `algo.act(observ, deterministic=True)` as a SavedModel at `path`.

    The model maps float32 observations [N, ...] (uint8 for frames) to environment
    actions [N, ...], with observation normalization included. For a recurrent policy
    (`algo.recurrent`) it maps observations and states [N, S] to a dict of `action` and `state`,
    `initial_state(N)` gives the states at the start of episodes, and
    `observe_reward(state, reward)` the states after a step that gave `reward` [N] (the
    same states unless the policy reads the last reward). Load it with
    `tf.saved_model.load(path)` and call it on a batch of observations. The folder is
    replaced atomically: if writing the new policy fails, the old one stays at `path`.

    Args:
      algo: an algorithm with an `act(observ, deterministic)` method, such as `PPO`.
      observation_space: the Box space of one observation.
      path: the SavedModel folder to write.
      metadata: if given, written as JSON to `batchrl.json` in the folder (with the
        model, so that both are replaced together).

    Returns:
      The path.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.with_name(path.name + ".old")
    if old.exists() and not path.exists():  # A kill between the two moves below.
        os.replace(old, path)
    staging = Path(tempfile.mkdtemp(prefix=path.name + ".", dir=path.parent))
    try:
        module = _RecurrentPolicy if getattr(algo, "recurrent", False) else _Policy
        tf.saved_model.save(module(algo, observation_space), str(staging))
        if metadata is not None:
            (staging / METADATA).write_text(json.dumps(metadata))
        if path.exists():
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            try:
                os.replace(staging, path)
            except BaseException:
                os.replace(old, path)  # Never leave the run without its policy.
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return path
