"""Gymnasium's MountainCarContinuous-v0 task in TensorFlow ops."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import tensorflow as tf

from batchrl.envs.classic_control import ClassicControlEnv

MIN_ACTION = -1.0
MAX_ACTION = 1.0
MIN_POSITION = -1.2
MAX_POSITION = 0.6
MAX_SPEED = 0.07
GOAL_POSITION = 0.45
GOAL_VELOCITY = 0.0
POWER = 0.0015


class MountainCarContinuous(ClassicControlEnv):
    """A batch of MountainCarContinuous-v0 environments: drive an underpowered car uphill.

    state [B, 2] = observ = (position, velocity); action [B, 1] force, clipped to [-1, 1]
    for the dynamics. Velocity is clipped to [-0.07, 0.07] and position to [-1.2, 0.6];
    the car stops at the left wall. Terminates at position >= 0.45 with velocity >= 0.
    Reward 100 on reaching the goal minus 0.1 action^2 of the unclipped action. Initial
    position ~ U[-0.6, -0.4], velocity 0.
    """

    _noise_size = 1

    def __init__(self, batch_size: int, seed: int = 0, max_episode_steps: int = 999):
        super().__init__(
            batch_size,
            seed,
            max_episode_steps,
            state_size=2,
            observation_space=gym.spaces.Box(
                low=np.array([MIN_POSITION, -MAX_SPEED], dtype=np.float32),
                high=np.array([MAX_POSITION, MAX_SPEED], dtype=np.float32),
                dtype=np.float32,
            ),
            action_space=gym.spaces.Box(
                low=MIN_ACTION, high=MAX_ACTION, shape=(1,), dtype=np.float32
            ),
            name="MountainCarContinuous",
        )

    def _dynamics(self, state, action):
        position, velocity = state[:, 0], state[:, 1]  # [B]
        force = tf.clip_by_value(action[:, 0], MIN_ACTION, MAX_ACTION)  # [B]
        velocity = velocity + (force * POWER - 0.0025 * tf.cos(3 * position))
        velocity = tf.clip_by_value(velocity, -MAX_SPEED, MAX_SPEED)
        position = tf.clip_by_value(position + velocity, MIN_POSITION, MAX_POSITION)
        at_wall = tf.equal(position, MIN_POSITION) & (velocity < 0)
        velocity = tf.where(at_wall, 0.0, velocity)
        terminated = (position >= GOAL_POSITION) & (velocity >= GOAL_VELOCITY)
        reward = tf.where(terminated, 100.0, 0.0) - 0.1 * action[:, 0] ** 2
        return tf.stack([position, velocity], 1), reward, terminated

    def _observ(self, state):
        return tf.identity(state)

    def _initial_state(self, uniform):
        position = -0.6 + 0.2 * uniform[:, 0]
        return tf.stack([position, tf.zeros_like(position)], 1)
