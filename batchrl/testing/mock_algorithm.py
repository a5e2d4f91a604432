"""An algorithm that acts at random and records its calls, for tests."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import tensorflow as tf

from batchrl.core import Algorithm
from batchrl.tools.in_graph_env import action_dtype


@dataclasses.dataclass
class Records:
    """The arguments of every call, in order (a plain object, so checkpoints ignore it)."""

    begun: list = dataclasses.field(default_factory=list)
    performed: list = dataclasses.field(default_factory=list)
    experienced: list = dataclasses.field(default_factory=list)
    ended: list = dataclasses.field(default_factory=list)


class MockAlgorithm(Algorithm):
    """Random actions from the action space; counts and records every call.

    Call counts are variables (`begin_calls`, `perform_calls`, `experience_calls`,
    `end_calls`), so they count executions inside a graph, not traces. With
    `record=True` the arguments of every call are appended to the lists of
    `self.records` (`begun`, `performed`, `experienced`, `ended`) through
    `tf.numpy_function`, which
    does not compile with XLA. Each call checks the shapes of what it receives.
    """

    def __init__(
        self,
        observation_space: gym.spaces.Box,
        action_space: gym.Space,
        seed: int = 0,
        record: bool = True,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self._observ_shape = tuple(observation_space.shape)
        self._action_space = action_space
        self._action_dtype = action_dtype(action_space)
        self._record = record
        self._rng = tf.random.Generator.from_seed(seed)
        self.begin_calls = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.perform_calls = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.experience_calls = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.end_calls = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.records = Records()

    def begin_episodes(self, agent_indices):
        self._check_indices(agent_indices)
        self.begin_calls.assign_add(1)
        self._append(self.records.begun, agent_indices)

    def perform(self, agent_indices, observ):
        self._check_indices(agent_indices)
        self._check_observ(observ, "observ")
        self.perform_calls.assign_add(1)
        count = tf.shape(agent_indices)[0]
        space = self._action_space
        if isinstance(space, gym.spaces.Discrete):
            action = self._rng.uniform(
                [count], int(space.start), int(space.start + space.n), tf.int32
            )
        else:
            low = np.where(np.isfinite(space.low), space.low, -1.0).astype(np.float32)
            high = np.where(np.isfinite(space.high), space.high, 1.0).astype(np.float32)
            shape = tf.concat([[count], space.shape], 0)
            action = low + (high - low) * self._rng.uniform(shape, dtype=tf.float32)
        self._append(self.records.performed, agent_indices, observ, action)
        return action

    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        self._check_indices(agent_indices)
        self._check_observ(observ, "observ")
        self._check_observ(next_observ, "next_observ")
        for name, value in (
            ("reward", reward),
            ("terminated", terminated),
            ("truncated", truncated),
        ):
            if value.shape.rank != 1:
                raise ValueError(f"{name} must have shape [K], got {value.shape}.")
        self.experience_calls.assign_add(1)
        self._append(
            self.records.experienced,
            agent_indices,
            observ,
            action,
            reward,
            terminated,
            truncated,
            next_observ,
        )

    def end_episodes(self, agent_indices):
        self._check_indices(agent_indices)
        self.end_calls.assign_add(1)
        self._append(self.records.ended, agent_indices)

    def _append(self, records, *tensors):
        if not self._record:
            return

        def append(*arrays):
            records.append(arrays[0] if len(arrays) == 1 else tuple(arrays))
            return np.int32(0)

        tf.numpy_function(append, list(tensors), tf.int32, stateful=True)

    def _check_indices(self, agent_indices):
        if agent_indices.dtype != tf.int32 or agent_indices.shape.rank != 1:
            raise ValueError(
                f"agent_indices must be an int32 tensor of shape [K], got {agent_indices.dtype} "
                f"{agent_indices.shape}."
            )

    def _check_observ(self, observ, name):
        if tuple(observ.shape[1:]) != self._observ_shape:
            raise ValueError(
                f"{name} must have shape [K, {', '.join(map(str, self._observ_shape))}], "
                f"got {observ.shape}."
            )
