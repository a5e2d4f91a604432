"""DQN: replay, n-step double-DQN targets and dueling networks, with every step in the graph."""

from __future__ import annotations

import gymnasium as gym
import tensorflow as tf

from batchrl.algorithms.dqn import exploration, targets
from batchrl.algorithms.dqn.networks import make_q_network
from batchrl.algorithms.off_policy import OffPolicy
from batchrl.config import ConfigError, check_choice
from batchrl.parts import optimizers
from batchrl.parts.polyak import polyak
from batchrl.parts.schedules import SCHEDULES, learning_rate
from batchrl.replay import RandomStream
from batchrl.tools.in_graph_env import observ_dtype


class DQN(OffPolicy):
    """Deep Q-learning for a batch of environments with discrete actions, driven by `simulate`.

    It reads like the papers (Mnih et al. 2015; van Hasselt et al. 2016; Wang et al.
    2016; Schaul et al. 2016; Hessel et al. 2018 for n-step returns):

    1. Act: `perform` picks each agent's action epsilon-greedily from the online Q
       network, epsilon falling linearly over the first part of the run.
    2. Store: `experience` pushes the B transitions of a step through an n-step window
       (`batchrl.replay.NStep`) and adds the finished ones to the replay buffer in one
       write; windows stop at episode ends (no bootstrap past `terminated`, a bootstrap
       from the last observation after `truncated`).
    3. Learn: every `train_freq` batched steps, once the buffer holds `learning_starts`
       transitions, `update` takes `gradient_steps` steps on minibatches: double-DQN
       targets from the target network, the Huber loss weighted by the importance weights
       of prioritized replay (1 for uniform), Adam at a constant rate or one falling
       linearly to zero over the run, the new priorities |TD error|, and the
       target network copied every `target_update_interval` environment steps (tau 1)
       or moved by Polyak averaging after every gradient step (tau < 1).
    4. Report: losses, Q values, epsilon, beta, the learning rate, the buffer's fill and
       priorities.

    `simulate` calls `update` between loops of steps (`steps_to_update`), so that a
    training call of K steps with all its updates is one graph call, and one XLA program
    with environments in TensorFlow ops.
    """

    config_section = "dqn"
    distribution = "replay_shards"  # On Ray: Ape-X: actors, replay shards, this learner.
    METRICS = ("loss", "q_mean", "td_abs_mean", "grad_norm")  # Means over an update.
    SUMMARIES = METRICS + (
        "epsilon",
        "beta",
        "learning_rate",
        "priority_max",
        "buffer_size",
        "updates",
    )

    @classmethod
    def check_config(cls, config) -> None:
        check_choice("dqn.learning_rate_schedule", config.dqn.learning_rate_schedule, SCHEDULES)
        cls.check_sections(
            config,
            {
                "target_update_interval": (lambda x: x >= 1, ">= 1 (environment steps)"),
                "exploration_fraction": (lambda x: 0 <= x <= 1, "in [0, 1]"),
                "exploration_initial_eps": (lambda x: 0 <= x <= 1, "in [0, 1]"),
                "exploration_final_eps": (lambda x: 0 <= x <= 1, "in [0, 1]"),
                "max_grad_norm": (lambda x: x > 0, "> 0"),
                "huber_delta": (lambda x: x > 0, "> 0"),
                "priority_alpha": (lambda x: x >= 0, ">= 0"),
                "priority_beta": (lambda x: 0 <= x <= 1, "in [0, 1]"),
                "priority_epsilon": (lambda x: x > 0, "> 0"),
            },
        )

    def __init__(self, batch_env, config, step: tf.Variable | None = None, seed: int = 0):
        """Creates the Q networks, the optimizer, the n-step window and the replay buffer.

        Args:
          batch_env: the in-graph batch environment (`InGraphEnv`) to learn in; its action
            space must be `Discrete`.
          config: the run's `Config`; DQN reads `config.dqn`, `config.network` and
            `config.train.total_steps` (for epsilon and beta).
          step: int64 variable counting environment steps; None counts from 0 here.
          seed: seed of the algorithm's random stream (exploration and sampling).

        Raises:
          ConfigError: on a config value or an action space DQN cannot train with.
        """
        super().__init__()
        self.check_config(config)
        space = batch_env.action_space
        if not isinstance(space, gym.spaces.Discrete):
            raise ConfigError(
                f"algorithm.name=dqn needs a Discrete action space; env.id="
                f"{config.env.id!r} has {space}. SAC trains continuous actions."
            )
        cfg = self._cfg = config.dqn
        network = config.network
        self._total_steps = int(config.train.total_steps)
        del step  # DQN counts its own environment steps, in `env_steps`.
        self._batch_size = len(batch_env)
        self._num_actions = int(space.n)
        self._observ_shape = tuple(batch_env.observation_space.shape)
        # The environment's dtype: uint8 frames reach the network as uint8, which scales
        # them to [0, 1], whatever dtype the buffer keeps them in (`_q_values`).
        self._observ_dtype = observ_dtype(batch_env.observation_space)
        # Exploration's random numbers, the same in graph mode and under XLA; the replay
        # buffer samples from a stream of its own (seed `seed`).
        self.exploration = RandomStream(seed + (1 << 32), name="exploration")

        # A plain MLP, or value and advantage streams over the shared convolutions.
        layout = (network.policy_layers, self._num_actions, network.activation)
        layout += (network.conv_filters, cfg.dueling)
        self.q = make_q_network(*layout, "q")
        self.target_q = make_q_network(*layout, "target_q")
        dummy = tf.zeros((1,) + self._observ_shape)
        self.q(dummy)
        self.target_q(dummy)
        polyak(self.target_q.variables, self.q.variables, 1.0)
        self.optimizer = optimizers.Adam(cfg.learning_rate)
        self.optimizer.build(self.q.trainable_variables)

        self.make_buffers(tf.TensorSpec([], tf.int32), seed, cfg.prioritized, self._observ_dtype)
        # The environment step of the target network's last copy.
        self._last_target_update = tf.Variable(
            0, dtype=tf.int64, trainable=False, name="last_target_update"
        )

    # Act.

    @tf.autograph.experimental.do_not_convert
    def perform(self, agent_indices, observ):
        q = self._q_values(self.q, observ)  # [K, A]
        return self._epsilon_greedy(q, self._epsilon())

    def stored_action(self, action):
        return tf.cast(action, tf.int32)  # [B]

    # Learn.

    def before_learning(self):
        cfg = self._cfg
        if cfg.tau == 1.0:
            due = self.env_steps - self._last_target_update >= cfg.target_update_interval
            tf.cond(due, self._copy_target, lambda: None)

    def _copy_target(self):
        polyak(self.target_q.variables, self.q.variables, 1.0)
        self._last_target_update.assign(self.env_steps)

    def gradient_step(self) -> dict[str, tf.Tensor]:
        indices, weights, batch = self.sample(self.beta())
        metrics, td_error = self.learn_on(weights, batch)
        self.replay.update_priorities(indices, tf.abs(td_error))
        return metrics

    def learn_on(self, weights, batch) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
        """One gradient step on a given batch, counted in `updates`.

        `gradient_step` calls it with a batch of its own buffer; Ape-X's learner
        (`batchrl.runners.ray.apex`) with one from a replay shard.

        Args:
          weights: float32 [N], importance weights (ones for uniform replay).
          batch: {"observ", "action", "reward", "discount", "next_observ"}, each [N, ...].

        Returns:
          The metrics named in `METRICS`, and the TD errors [N] (new priorities: |delta|).
        """
        cfg = self._cfg
        self.optimizer.learning_rate.assign(self._learning_rate())
        target = self._targets(batch)  # [N]
        with tf.GradientTape() as tape:
            q = self._q_values(self.q, batch["observ"])  # [N, A]
            q_taken = tf.gather(q, batch["action"], batch_dims=1)  # [N]
            td_error = target - q_taken  # [N]
            loss = tf.reduce_mean(weights * targets.huber(td_error, cfg.huber_delta))
        variables = self.q.trainable_variables
        gradients = tape.gradient(loss, variables)
        gradients, grad_norm = tf.clip_by_global_norm(gradients, cfg.max_grad_norm)
        self.optimizer.apply_gradients(zip(gradients, variables))
        if cfg.tau < 1.0:
            polyak(self.target_q.variables, self.q.variables, cfg.tau)
        self.updates.assign_add(1)
        metrics = {
            "loss": loss,
            "q_mean": tf.reduce_mean(q_taken),
            "td_abs_mean": tf.reduce_mean(tf.abs(td_error)),
            "grad_norm": grad_norm,
        }
        return metrics, td_error

    def td_errors(self, batch) -> tf.Tensor:
        """TD errors [N] of transitions under the current networks, learning nothing.

        Ape-X's actors give their transitions these as initial priorities (Horgan et al.
        2018, Algorithm 1, line 10).
        """
        q = self._q_values(self.q, batch["observ"])  # [N, A]
        q_taken = tf.gather(q, batch["action"], batch_dims=1)  # [N]
        return self._targets(batch) - q_taken

    def _targets(self, batch) -> tf.Tensor:
        """(Double-)DQN targets [N] of a batch of n-step transitions."""
        next_observ = batch["next_observ"]
        next_q_target = self._q_values(self.target_q, next_observ)  # [N, A]
        if self._cfg.double:
            next_q_online = self._q_values(self.q, next_observ)  # [N, A]
            return targets.double_q_targets(
                batch["reward"], batch["discount"], next_q_online, next_q_target
            )
        return targets.q_targets(batch["reward"], batch["discount"], next_q_target)

    def _q_values(self, network, observ):
        """Q values [N, A] of observations [N, ...], in the environment's dtype or the
        buffer's: uint8 frames are scaled to [0, 1] in the network (`as_float`)."""
        return network(tf.cast(observ, self._observ_dtype))  # [N, A]

    def _epsilon(self):
        cfg = self._cfg
        return exploration.linear_epsilon(
            self.env_steps,
            self._total_steps,
            cfg.exploration_fraction,
            cfg.exploration_initial_eps,
            cfg.exploration_final_eps,
        )

    def _learning_rate(self) -> tf.Tensor:
        """Adam's rate: `learning_rate`, constant or falling linearly to zero at
        `train.total_steps` environment steps (`learning_rate_schedule`)."""
        cfg = self._cfg
        schedule = cfg.learning_rate_schedule
        return learning_rate(cfg.learning_rate, schedule, self.env_steps, self._total_steps)

    def beta(self) -> tf.Tensor:
        """Prioritized replay's importance exponent, from `priority_beta` to 1 over the run."""
        progress = tf.minimum(tf.cast(self.env_steps, tf.float32) / float(self._total_steps), 1.0)
        return self._cfg.priority_beta + (1.0 - self._cfg.priority_beta) * progress

    def summary_values(self):
        return {
            "epsilon": self._epsilon(),
            "beta": self.beta(),
            "learning_rate": self._learning_rate(),
            "priority_max": self._max_priority(),
        }

    def _max_priority(self):
        if self._cfg.prioritized:
            return tf.cast(self.replay.max_priority(), tf.float32)
        return tf.constant(1.0)

    # The policy, for evaluation and export.

    def act(self, observ, deterministic: bool = True):
        """Actions [N] for observations [N, ...]: argmax of Q, or epsilon-greedy at the
        final epsilon when not deterministic."""
        q = self._q_values(self.q, observ)  # [N, A]
        if deterministic:
            return tf.argmax(q, axis=1, output_type=tf.int32)
        return self._epsilon_greedy(q, self._cfg.exploration_final_eps)

    def explore(self, observ, epsilon) -> tf.Tensor:
        """Actions [N] for observations [N, ...], epsilon-greedy with the given epsilon: a
        scalar, or one per observation [N] (Ape-X's actors act so)."""
        return self._epsilon_greedy(self._q_values(self.q, observ), epsilon)

    def _epsilon_greedy(self, q, epsilon):
        """Actions [N]: the argmax of q [N, A], or with probability epsilon a uniform one."""
        greedy = tf.argmax(q, axis=1, output_type=tf.int32)  # [N]
        draw = self.exploration.uniform(tf.stack([2, tf.shape(q)[0]]))  # [2, N]
        random = tf.minimum(
            tf.cast(draw[0] * self._num_actions, tf.int32), self._num_actions - 1
        )  # [N]
        return tf.where(draw[1] < epsilon, random, greedy)
