"""A complete custom algorithm: REINFORCE with a running-mean baseline, for Discrete actions.

Run it alone with `python examples/reinforce/reinforce.py`. Installed as a package
(`pip install -e examples/reinforce`, whose pyproject.toml declares the entry point),
the train script knows it by name and reads and checks its own config section
(`reinforce`):

    python -m batchrl.scripts.train --config=cartpole \
        --set algorithm.name=reinforce --set reinforce.learning_rate=3e-3

Without installing it, a config can name it by module and class instead:
`PYTHONPATH=examples/reinforce ... --set algorithm.name=reinforce:Reinforce`.
"""

import gymnasium as gym
import tensorflow as tf
import tensorflow_probability as tfp

from batchrl import Algorithm, BatchEnv, InGraphBatchEnv, Policy, simulate
from batchrl.networks import MLP


class Reinforce(Algorithm, Policy):
    """Monte-Carlo policy gradient, one update per finished episode batch.

    As a `Policy` (`act`) the train script evaluates and exports it; its keys live in the
    config section `reinforce`, whose schema is `config_defaults`.
    """

    config_section = "reinforce"
    config_defaults = {"learning_rate": 2e-3, "discount": 0.99, "max_length": 500}

    @classmethod
    def check_config(cls, config):
        """Refuses, naming the key, a value of its own section it cannot train with."""
        from batchrl.config import check_range

        check_range(
            config.reinforce,
            "reinforce",
            {
                "learning_rate": (lambda x: x > 0, "> 0"),
                "discount": (lambda x: 0 <= x <= 1, "in [0, 1]"),
                "max_length": (lambda x: x >= 1, ">= 1 (steps)"),
            },
        )

    def __init__(self, batch_env, config=None, step=None, seed=0):
        super().__init__()
        cfg = config.reinforce if config is not None else self.config_defaults
        self._discount = cfg["discount"]
        self._max_length = cfg["max_length"]
        batch_size, observ_size = len(batch_env), batch_env.observation_space.shape[0]
        self.policy = MLP([32], batch_env.action_space.n, output_gain=0.01)
        self.policy(tf.zeros([1, observ_size]))
        self.optimizer = tf.keras.optimizers.Adam(cfg["learning_rate"])
        self._rng = tf.random.Generator.from_seed(seed)
        max_length = self._max_length
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
        seed = tf.cast(self._rng.make_seeds(1)[:, 0], tf.int32)
        return tf.random.stateless_categorical(logits, 1, seed, dtype=tf.int32)[:, 0]  # [K]

    def act(self, observ, deterministic=True):
        logits = self.policy(observ)  # [N, A]
        if deterministic:
            return tf.argmax(logits, -1, output_type=tf.int32)  # [N]
        seed = tf.cast(self._rng.make_seeds(1)[:, 0], tf.int32)
        return tf.random.stateless_categorical(logits, 1, seed, dtype=tf.int32)[:, 0]

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


def main(total_steps=60_000, num_envs=8, steps_per_call=100, seed=0):
    tf.keras.utils.set_random_seed(seed)  # The network's initial weights.
    envs = [gym.make("CartPole-v1") for _ in range(num_envs)]
    batch_env = InGraphBatchEnv(BatchEnv(envs, blocking=True), seed=seed)
    algo = Reinforce(batch_env, seed=seed)
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
