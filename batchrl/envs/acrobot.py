"""Gymnasium's Acrobot-v1 swing-up task in TensorFlow ops."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import tensorflow as tf

from batchrl.envs.classic_control import ClassicControlEnv

DT = 0.2
LINK_LENGTH_1 = 1.0
LINK_MASS_1 = 1.0
LINK_MASS_2 = 1.0
LINK_COM_POS_1 = 0.5
LINK_COM_POS_2 = 0.5
LINK_MOI = 1.0
GRAVITY = 9.8
MAX_VEL_1 = 4 * math.pi
MAX_VEL_2 = 9 * math.pi
TORQUES = (-1.0, 0.0, 1.0)


def wrap(x: tf.Tensor, low: float, high: float) -> tf.Tensor:
    """Shifts x by whole periods (high - low) into [low, high], as Gymnasium's `wrap`."""
    period = high - low
    x = x - period * tf.math.ceil(tf.maximum(x - high, 0.0) / period)
    return x + period * tf.math.ceil(tf.maximum(low - x, 0.0) / period)


def derivatives(state: tf.Tensor, torque: tf.Tensor) -> tf.Tensor:
    """Time derivative [B, 4] of states [B, 4] under torques [B] on the second joint.

    The equations of motion of Sutton and Barto's book (and its Java code), which adds
    the term -m2 l1 lc2 dtheta1^2 sin(theta2) to the NIPS paper's version.
    """
    m1, m2, l1 = LINK_MASS_1, LINK_MASS_2, LINK_LENGTH_1
    lc1, lc2, inertia = LINK_COM_POS_1, LINK_COM_POS_2, LINK_MOI
    theta1, theta2, dtheta1, dtheta2 = tf.unstack(state, axis=1)  # [B] each
    d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * tf.cos(theta2)) + 2 * inertia
    d2 = m2 * (lc2**2 + l1 * lc2 * tf.cos(theta2)) + inertia
    phi2 = m2 * lc2 * GRAVITY * tf.cos(theta1 + theta2 - math.pi / 2.0)
    phi1 = (
        -m2 * l1 * lc2 * dtheta2**2 * tf.sin(theta2)
        - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * tf.sin(theta2)
        + (m1 * lc1 + m2 * l1) * GRAVITY * tf.cos(theta1 - math.pi / 2)
        + phi2
    )
    ddtheta2 = (torque + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * tf.sin(theta2) - phi2) / (
        m2 * lc2**2 + inertia - d2**2 / d1
    )
    ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
    return tf.stack([dtheta1, dtheta2, ddtheta1, ddtheta2], 1)


class Acrobot(ClassicControlEnv):
    """A batch of Acrobot-v1 environments: swing the tip of a two-link chain above a line.

    state [B, 4] = (theta1, theta2, dtheta1, dtheta2); observ [B, 6] = (cos theta1,
    sin theta1, cos theta2, sin theta2, dtheta1, dtheta2). Action [B] int32 in {0, 1, 2}
    applies torque {-1, 0, 1} for one classic fourth-order Runge-Kutta step of 0.2 s;
    angles are then wrapped to [-pi, pi] and velocities clipped to 4 pi and 9 pi. Terminates
    when -cos theta1 - cos(theta1 + theta2) > 1, with reward 0, else reward -1. Initial
    state ~ U[-0.1, 0.1]^4. The integration runs in float64 (not available on TPUs).
    """

    _noise_size = 4

    def __init__(self, batch_size: int, seed: int = 0, max_episode_steps: int = 500):
        high = np.array([1.0, 1.0, 1.0, 1.0, MAX_VEL_1, MAX_VEL_2], dtype=np.float32)
        super().__init__(
            batch_size,
            seed,
            max_episode_steps,
            state_size=4,
            observation_space=gym.spaces.Box(low=-high, high=high, dtype=np.float32),
            action_space=gym.spaces.Discrete(3),
            name="Acrobot",
        )

    def _dynamics(self, state, action):
        # The Runge-Kutta step runs in float64, as Gymnasium's: near the velocity bounds
        # float32 rounding alone moves the next velocities by up to 1e-4 relative.
        state = tf.cast(state, tf.float64)  # [B, 4]
        torque = tf.gather(tf.constant(TORQUES, tf.float64), action)  # [B]
        k1 = derivatives(state, torque)
        k2 = derivatives(state + DT / 2 * k1, torque)
        k3 = derivatives(state + DT / 2 * k2, torque)
        k4 = derivatives(state + DT * k3, torque)
        state = state + DT / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
        theta1, theta2, dtheta1, dtheta2 = tf.unstack(state, axis=1)
        state = tf.stack(
            [
                wrap(theta1, -math.pi, math.pi),
                wrap(theta2, -math.pi, math.pi),
                tf.clip_by_value(dtheta1, -MAX_VEL_1, MAX_VEL_1),
                tf.clip_by_value(dtheta2, -MAX_VEL_2, MAX_VEL_2),
            ],
            1,
        )
        terminated = -tf.cos(state[:, 0]) - tf.cos(state[:, 1] + state[:, 0]) > 1.0
        reward = tf.where(terminated, 0.0, -1.0)
        return tf.cast(state, tf.float32), reward, terminated

    def _observ(self, state):
        theta1, theta2, dtheta1, dtheta2 = tf.unstack(state, axis=1)
        return tf.stack(
            [tf.cos(theta1), tf.sin(theta1), tf.cos(theta2), tf.sin(theta2), dtheta1, dtheta2],
            1,
        )

    def _initial_state(self, uniform):
        return 0.2 * uniform - 0.1
