"""A small environment in TensorFlow ops with known episode lengths, for tests."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import tensorflow as tf

from batchrl.tools.in_graph_env import InGraphEnv


class Countdown(InGraphEnv):
    """Agent i's episodes last lengths[i] steps; a step pays rewards[i] + action_reward * action.

    Observations are zeros [B, 1]; actions are 0 or 1.
    """

    def __init__(self, lengths, rewards=None, action_reward: float = 0.0):
        lengths = np.asarray(lengths, np.int32)
        batch_size = len(lengths)
        super().__init__(
            batch_size, gym.spaces.Box(-1.0, 1.0, (1,), np.float32), gym.spaces.Discrete(2)
        )
        rewards = np.zeros(batch_size) if rewards is None else np.asarray(rewards)
        self.elapsed = tf.Variable(tf.zeros([batch_size], tf.int32), trainable=False)
        self.lengths = tf.constant(lengths)
        self.rewards = tf.constant(rewards, tf.float32)
        self.action_reward = float(action_reward)

    def _step(self, action):
        self.elapsed.assign_add(tf.ones_like(self.elapsed))
        terminated = self.elapsed >= self.lengths
        observ = tf.zeros([self._batch_size, 1])
        reward = self.rewards + self.action_reward * tf.cast(action, tf.float32)
        return observ, reward, terminated, tf.zeros_like(terminated)

    def _reset(self, indices):
        self.elapsed.scatter_nd_update(indices[:, None], tf.zeros_like(indices))
        return tf.zeros([tf.shape(indices)[0], 1])
