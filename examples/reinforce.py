"""A complete custom algorithm: REINFORCE with a running-mean baseline, for Discrete actions.

Run it with `python examples/reinforce.py`; the README walks through it.
"""

import gymnasium as gym
import tensorflow as tf
import tensorflow_probability as tfp

from batchrl.core import Algorithm
from batchrl.networks import MLP
from batchrl.tools import BatchEnv, InGraphBatchEnv, simulate


class Reinforce(Algorithm):
    """Monte-Carlo policy gradient, one update per finished episode batch."""

    def __init__(self, batch_env, max_length=500, learning_rate=2e-3, discount=0.99):
        super().__init__()
        self._discount = discount
        self._max_length = max_length
        batch_size, observ_size = len(batch_env), batch_env.observation_space.shape[0]
        self.policy = MLP([32], batch_env.action_space.n, output_gain=0.01)
        self.policy(tf.zeros([1, observ_size]))
        self.optimizer = tf.keras.optimizers.Adam(learning_rate)
        # Each agent's current episode, time-major: [L, B, ...].
        self.observ = tf.Variable(tf.zeros([max_length, batch_size, observ_size]))
        self.action = tf.Variable(tf.zeros([max_length, batch_size], tf.int32))
        self.reward = tf.Variable(tf.zeros([max_length, batch_size]))
        self.length = tf.Variable(tf.zeros([batch_size], tf.int32))
        self.baseline = tf.Variable(0.0)

    def begin_episodes(self, agent_indices):
        self.length.scatter_nd_update(agent_indices[:, None], tf.zeros_like(agent_indices))

    def perform(self, agent_indices, observ):
        logits = self.policy(observ)  # [K, A]
        return tf.random.categorical(logits, 1, dtype=tf.int32)[:, 0]  # [K]

    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        time = tf.minimum(tf.gather(self.length, agent_indices), self._max_length - 1)
        rows = tf.stack([time, agent_indices], 1)  # [K, 2]
        self.observ.scatter_nd_update(rows, observ)
        self.action.scatter_nd_update(rows, action)
        self.reward.scatter_nd_update(rows, reward)
        self.length.scatter_nd_add(agent_indices[:, None], tf.ones_like(agent_indices))

    def end_episodes(self, agent_indices):
        length = tf.minimum(tf.gather(self.length, agent_indices), self._max_length)  # [K]
        observ = tf.gather(self.observ, agent_indices, axis=1)  # [L, K, O]
        action = tf.gather(self.action, agent_indices, axis=1)  # [L, K]
        reward = tf.gather(self.reward, agent_indices, axis=1)  # [L, K]
        mask = tf.range(self._max_length)[:, None] < length[None]  # [L, K]
        reward = tf.where(mask, reward, 0.0)
        returns = tf.scan(
            lambda future, r: r + self._discount * future,
            reward,
            tf.zeros_like(reward[0]),
            reverse=True,
        )  # [L, K]
        advantage = (returns - self.baseline) / (tf.abs(self.baseline) + 1.0)
        with tf.GradientTape() as tape:
            logits = self.policy(tf.reshape(observ, [-1, observ.shape[-1]]))
            dist = tfp.distributions.Categorical(
                logits=tf.reshape(logits, tf.concat([tf.shape(action), [-1]], 0))
            )
            loss = -tf.reduce_sum(tf.where(mask, dist.log_prob(action) * advantage, 0.0))
            loss /= tf.maximum(tf.reduce_sum(tf.cast(mask, tf.float32)), 1.0)
        variables = self.policy.trainable_variables
        self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        mean_return = tf.reduce_mean(tf.where(length > 0, returns[0], 0.0))
        self.baseline.assign(0.9 * self.baseline + 0.1 * mean_return)


def main(total_steps=60_000, num_envs=8, steps_per_call=100):
    envs = [gym.make("CartPole-v1") for _ in range(num_envs)]
    batch_env = InGraphBatchEnv(BatchEnv(envs, blocking=True), seed=0)
    algo = Reinforce(batch_env)
    run = tf.function(lambda: simulate(batch_env, algo, steps=steps_per_call))
    returns = []
    for _ in range(total_steps // (num_envs * steps_per_call)):
        stats = run()
        if stats["episodes"] > 0:
            returns.append(float(stats["mean_return"]))
            print(f"mean return {returns[-1]:.1f}")
    batch_env.close()
    return returns


if __name__ == "__main__":
    main()
