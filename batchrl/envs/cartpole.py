"""Gymnasium's CartPole-v1 balancing task in TensorFlow ops."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import tensorflow as tf

from batchrl.envs.classic_control import ClassicControlEnv

GRAVITY = 9.8
MASS_CART = 1.0
MASS_POLE = 0.1
TOTAL_MASS = MASS_CART + MASS_POLE
LENGTH = 0.5  # Half the pole's length.
POLEMASS_LENGTH = MASS_POLE * LENGTH
FORCE_MAG = 10.0
TAU = 0.02
THETA_THRESHOLD = 12 * 2 * math.pi / 360
X_THRESHOLD = 2.4


class CartPole(ClassicControlEnv):
    """A batch of CartPole-v1 environments: balance a pole on a cart pushed left or right.

    state [B, 4] = observ = (x, x_dot, theta, theta_dot); action [B] int32, 1 pushes
    right and anything else left; explicit Euler steps of 0.02 s. Terminates when
    |x| > 2.4 or |theta| > 12 degrees. Reward 1 on every step up to and including the
    terminating one, and 0 on steps taken after termination without a reset (Gymnasium
    1.x with `sutton_barto_reward=False`; the variable `fallen` [B] remembers it until the
    next reset). Initial state ~ U[-0.05, 0.05]^4.
    """

    _noise_size = 4

    def __init__(self, batch_size: int, seed: int = 0, max_episode_steps: int = 500):
        high = np.array([X_THRESHOLD * 2, np.inf, THETA_THRESHOLD * 2, np.inf], dtype=np.float32)
        super().__init__(
            batch_size,
            seed,
            max_episode_steps,
            state_size=4,
            observation_space=gym.spaces.Box(-high, high, dtype=np.float32),
            action_space=gym.spaces.Discrete(2),
            name="CartPole",
        )
        self.fallen = tf.Variable(tf.zeros([batch_size], tf.bool), trainable=False)

    def _dynamics(self, state, action):
        x, x_dot, theta, theta_dot = tf.unstack(state, axis=1)  # [B] each
        force = tf.where(tf.equal(action, 1), FORCE_MAG, -FORCE_MAG)
        cos, sin = tf.cos(theta), tf.sin(theta)
        temp = (force + POLEMASS_LENGTH * theta_dot**2 * sin) / TOTAL_MASS
        theta_acc = (GRAVITY * sin - cos * temp) / (
            LENGTH * (4.0 / 3.0 - MASS_POLE * cos**2 / TOTAL_MASS)
        )
        x_acc = temp - POLEMASS_LENGTH * theta_acc * cos / TOTAL_MASS
        x, x_dot = x + TAU * x_dot, x_dot + TAU * x_acc
        theta, theta_dot = theta + TAU * theta_dot, theta_dot + TAU * theta_acc
        terminated = (tf.abs(x) > X_THRESHOLD) | (tf.abs(theta) > THETA_THRESHOLD)
        fallen = self.fallen.read_value()
        reward = tf.where(terminated & fallen, 0.0, 1.0)
        self.fallen.assign(fallen | terminated)
        return tf.stack([x, x_dot, theta, theta_dot], 1), reward, terminated

    def _reset(self, indices):
        self.fallen.scatter_nd_update(indices[:, None], tf.zeros_like(indices, tf.bool))
        return super()._reset(indices)

    def _observ(self, state):
        return tf.identity(state)

    def _initial_state(self, uniform):
        return 0.1 * uniform - 0.05
