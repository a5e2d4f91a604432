"""A complete environment written in TensorFlow ops, and PPO trained on it in one graph.

A point mass on a line is pushed by a force in [-1, 1] and should come to rest at the
origin. The environment implements batchrl's in-graph interface, `InGraphEnv`, with two
methods in TensorFlow ops, so `simulate` steps it with no Python callback and the whole
training call, rollout and update, compiles with XLA:

    python examples/point_mass.py

The train script takes it too, by entry point, with this folder on the Python path:

    PYTHONPATH=examples python -m batchrl.scripts.train --config=debug \\
        --set env.backend=tensorflow --set env.id=point_mass:PointMass
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import tensorflow as tf

from batchrl import InGraphEnv

DT = 0.1


class PointMass(InGraphEnv):
    """B point masses: observation [position, velocity], action [force], reward -|position|.

    An episode starts at a position uniform in [-1, 1] at rest, terminates when the point
    leaves [-2, 2] (a last reward of -10) and is truncated after `max_episode_steps`.
    """

    def __init__(self, batch_size: int, seed: int = 0, max_episode_steps: int = 100):
        high = np.array([np.inf, np.inf], np.float32)
        super().__init__(
            batch_size,
            observation_space=gym.spaces.Box(-high, high, dtype=np.float32),
            action_space=gym.spaces.Box(-1.0, 1.0, (1,), np.float32),
            name="PointMass",
        )
        self.seed = seed  # The train script sets a new seed on resume, before tracing.
        self.max_episode_steps = max_episode_steps
        # State that lives across steps goes into variables: position and velocity [B, 2],
        # the steps of the running episodes, and a counter that makes every reset draw
        # new random numbers from a stateless generator.
        self.state = tf.Variable(tf.zeros([batch_size, 2]), trainable=False)
        self.elapsed = tf.Variable(tf.zeros([batch_size], tf.int32), trainable=False)
        self.resets = tf.Variable(0, trainable=False)

    def _step(self, action):
        """Returns observ [B, 2], reward [B], terminated [B] and truncated [B]."""
        force = tf.clip_by_value(action[:, 0], -1.0, 1.0)  # [B]
        position, velocity = tf.unstack(self.state, axis=1)  # [B] each
        velocity = velocity + DT * force
        position = position + DT * velocity
        state = tf.stack([position, velocity], 1)  # [B, 2]
        self.state.assign(state)
        self.elapsed.assign_add(tf.ones_like(self.elapsed))
        terminated = tf.abs(position) > 2.0
        reward = tf.where(terminated, -10.0, -tf.abs(position))
        truncated = self.elapsed >= self.max_episode_steps
        return state, reward, terminated, truncated

    def _reset(self, indices):
        """Starts new episodes for the environments at `indices` [K]; returns observ [K, 2]."""
        seed = tf.stack([tf.constant(self.seed), self.resets])
        position = tf.random.stateless_uniform([tf.size(indices)], seed, -1.0, 1.0)  # [K]
        self.resets.assign_add(1)
        state = tf.stack([position, tf.zeros_like(position)], 1)  # [K, 2]
        rows = indices[:, None]
        self.state.scatter_nd_update(rows, state)
        self.elapsed.scatter_nd_update(rows, tf.zeros_like(indices))
        return state


def main(total_steps: int = 65536, batch_size: int = 64, jit_compile: bool = True, seed: int = 0):
    """Trains PPO on PointMass; returns the mean training return of each call."""
    from batchrl import load_run_config, simulate
    from batchrl.algorithms import PPO

    config = load_run_config(
        "default",
        [
            "ppo.rollout_length=64",
            "ppo.minibatches=8",
            "ppo.learning_rate=1e-3",
            f"train.total_steps={total_steps}",
        ],
    )
    tf.keras.utils.set_random_seed(seed)
    env = PointMass(batch_size, seed=seed)
    algo = PPO(env, config, seed=seed)
    train = tf.function(lambda: simulate(env, algo, steps=64), jit_compile=jit_compile)
    returns = []
    for _ in range(total_steps // (64 * batch_size)):
        returns.append(float(train()["mean_return"]))
        print(f"mean return {returns[-1]:8.2f}")
    return returns


if __name__ == "__main__":
    main()
