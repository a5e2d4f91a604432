"""Gymnasium's Pendulum-v1 swing-up task in TensorFlow ops."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import tensorflow as tf

from batchrl.envs.classic_control import ClassicControlEnv

MAX_SPEED = 8.0
MAX_TORQUE = 2.0
DT = 0.05
MASS = 1.0
LENGTH = 1.0


def angle_normalize(x: tf.Tensor) -> tf.Tensor:
    """Maps angles to [-pi, pi), as Gymnasium's `angle_normalize`."""
    return tf.math.floormod(x + math.pi, 2 * math.pi) - math.pi


class Pendulum(ClassicControlEnv):
    """A batch of Pendulum-v1 environments: swing a pendulum up and hold it upright.

    state [B, 2] = (theta, theta_dot), theta = 0 upright and not wrapped, as Gymnasium.
    observ [B, 3] = (cos theta, sin theta, theta_dot); action [B, 1] torque, clipped to
    [-2, 2]. Reward -(angle_normalize(theta)^2 + 0.1 theta_dot^2 + 0.001 torque^2) of the
    state before the step; never terminates; truncated after `max_episode_steps`. Initial
    theta ~ U[-pi, pi], theta_dot ~ U[-1, 1].
    """

    _noise_size = 2

    def __init__(
        self, batch_size: int, seed: int = 0, max_episode_steps: int = 200, g: float = 10.0
    ):
        high = np.array([1.0, 1.0, MAX_SPEED], dtype=np.float32)
        super().__init__(
            batch_size,
            seed,
            max_episode_steps,
            state_size=2,
            observation_space=gym.spaces.Box(low=-high, high=high, dtype=np.float32),
            action_space=gym.spaces.Box(
                low=-MAX_TORQUE, high=MAX_TORQUE, shape=(1,), dtype=np.float32
            ),
            name="Pendulum",
        )
        self.g = float(g)

    def _dynamics(self, state, action):
        theta, theta_dot = state[:, 0], state[:, 1]  # [B]
        torque = tf.clip_by_value(action[:, 0], -MAX_TORQUE, MAX_TORQUE)  # [B]
        cost = angle_normalize(theta) ** 2 + 0.1 * theta_dot**2 + 0.001 * torque**2
        theta_acc = 3 * self.g / (2 * LENGTH) * tf.sin(theta) + 3.0 / (MASS * LENGTH**2) * torque
        theta_dot = tf.clip_by_value(theta_dot + theta_acc * DT, -MAX_SPEED, MAX_SPEED)
        theta = theta + theta_dot * DT
        terminated = tf.zeros_like(theta, tf.bool)
        return tf.stack([theta, theta_dot], 1), -cost, terminated

    def _observ(self, state):
        theta, theta_dot = state[:, 0], state[:, 1]
        return tf.stack([tf.cos(theta), tf.sin(theta), theta_dot], 1)  # [K, 3]

    def _initial_state(self, uniform):
        high = tf.constant([math.pi, 1.0])
        return (2 * uniform - 1) * high  # [K, 2]
