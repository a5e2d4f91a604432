"""SAC: soft actor-critic with twin critics, a learned temperature and replay in the graph."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import tensorflow as tf

from batchrl.algorithms.off_policy import OffPolicy
from batchrl.algorithms.sac import losses, squashed_gaussian, targets
from batchrl.algorithms.sac.networks import SquashedGaussianActor, TwinCritic
from batchrl.config import ConfigError
from batchrl.parts import optimizers
from batchrl.parts.polyak import polyak
from batchrl.replay import RandomStream


class SAC(OffPolicy):
    """Soft actor-critic for a batch of environments with Box actions, driven by `simulate`.

    It reads like the paper (Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and
    Applications", arXiv 1812.05905):

    1. Act: `perform` samples each agent's action from the tanh-squashed Gaussian policy,
       scaled to the space's bounds, or uniformly from the bounds during the first
       `learning_starts` environment steps.
    2. Store: `experience` pushes the B transitions of a step, actions mapped to
       [-1, 1], through an n-step window (`batchrl.replay.NStep`) into a uniform replay
       buffer; windows stop at episode ends (no bootstrap past `terminated`).
    3. Learn: every `train_freq` batched steps, once the buffer holds `learning_starts`
       transitions, `update` takes `gradient_steps` steps on minibatches, each in
       Stable-Baselines3's order: the temperature (from log pi of fresh actions at the
       replayed states), the twin critics (toward soft targets from the target critics
       and the policy at the next states, with the temperature from before its step),
       the actor (through the updated critics), and the target critics by Polyak
       averaging every `target_update_interval` gradient steps.
    4. Report: losses, the temperature, the policy's entropy, Q values, the buffer's fill.

    `simulate` calls `update` between loops of steps (`steps_to_update`), so that a
    training call of K steps with all its updates is one graph call, and one XLA program
    with environments in TensorFlow ops. Random numbers come from `RandomStream`s: the
    same bits eagerly, in graph mode and under XLA; Gaussian noise is made from them by
    Box-Muller (`squashed_gaussian.normal_from_uniforms`).
    """

    config_section = "sac"
    # Means over the gradient steps of an update, then the other scalars written.
    METRICS = ("actor_loss", "critic_loss", "alpha", "alpha_loss", "entropy", "q_mean")
    SUMMARIES = METRICS + ("buffer_size", "updates")

    @classmethod
    def check_config(cls, config) -> None:
        cls.check_sections(
            config,
            {
                "target_update_interval": (lambda x: x >= 1, ">= 1 (gradient steps)"),
                "ent_coef": (_is_auto_or_positive, "auto (or ~) or a number > 0"),
                "ent_coef_init": (lambda x: x > 0, "> 0"),
                "target_entropy": (_is_auto_or_number, "auto (or ~) or a number"),
            },
        )

    def __init__(self, batch_env, config, step: tf.Variable | None = None, seed: int = 0):
        """Creates the actor, the twin critics and their targets, the optimizers and buffers.

        Args:
          batch_env: the in-graph batch environment (`InGraphEnv`) to learn in; its action
            space must be a bounded `Box`.
          config: the run's `Config`; SAC reads `config.sac` and `config.network`
            (`policy_layers` for the actor, `value_layers` for each critic, `activation`).
            `config.train.total_steps` enters nothing: no schedule depends on it.
          step: int64 variable counting environment steps; None counts from 0 here.
          seed: seed of the algorithm's random streams (acting, updates, replay sampling).

        Raises:
          ConfigError: on a config value or an action space SAC cannot train with.
        """
        super().__init__()
        self.check_config(config)
        space = batch_env.action_space
        check_action_space("sac", config, space)
        cfg = self._cfg = config.sac
        network = config.network
        del step  # SAC counts its own environment steps, in `env_steps`.
        self._batch_size = len(batch_env)
        self._observ_shape = tuple(batch_env.observation_space.shape)
        size = self._action_size = int(np.prod(space.shape))
        if cfg.target_entropy in (None, "auto"):
            self._target_entropy = -float(size)
        else:
            self._target_entropy = float(cfg.target_entropy)
        self._learn_alpha = cfg.ent_coef in (None, "auto")
        # Acting's random numbers and the gradient steps' (the policy's noise at replayed
        # states), the same in graph mode and under XLA; the replay buffer samples from a
        # stream of its own (seed `seed`).
        self.exploration = RandomStream(seed + (1 << 32), name="exploration")
        self.noise = RandomStream(seed + (2 << 32), name="noise")

        activation = network.activation
        self.actor = SquashedGaussianActor(network.policy_layers, activation, space)
        self.critic = TwinCritic(network.value_layers, activation, "critic")
        self.target_critic = TwinCritic(network.value_layers, activation, "target_critic")
        observ = tf.zeros((1,) + self._observ_shape)
        self.actor.gaussian(observ)
        self.critic(observ, tf.zeros([1, size]))
        self.target_critic(observ, tf.zeros([1, size]))
        polyak(self.target_critic.variables, self.critic.variables, 1.0)
        # PyTorch's Adam epsilon, as Stable-Baselines3 uses it, for all three.
        self.actor_optimizer = optimizers.Adam(cfg.learning_rate, epsilon=1e-8)
        self.actor_optimizer.build(self.actor.trainable_variables)
        self.critic_optimizer = optimizers.Adam(cfg.learning_rate, epsilon=1e-8)
        self.critic_optimizer.build(self.critic.trainable_variables)
        if self._learn_alpha:
            init = np.log(cfg.ent_coef_init)
            self.log_alpha = tf.Variable(init, dtype=tf.float32, name="log_alpha")
            self.alpha_optimizer = optimizers.Adam(cfg.learning_rate, epsilon=1e-8)
            self.alpha_optimizer.build([self.log_alpha])
        else:
            self.log_alpha = tf.constant(np.log(float(cfg.ent_coef)), tf.float32)

        action = tf.TensorSpec([size], tf.float32)  # In [-1, 1] (`stored_action`).
        self.make_buffers(action, seed)

    # Act.

    @tf.autograph.experimental.do_not_convert
    def perform(self, agent_indices, observ):
        draw = self.exploration.uniform([3, self._batch_size, self._action_size])  # [3, B, A]
        noise = squashed_gaussian.normal_from_uniforms(draw[0], draw[1])  # [B, A]
        policy = self.actor.to_env(self.actor.sample(observ, noise)[0])  # [B, ...]
        random = self.actor.uniform(draw[2])  # [B, ...]
        warming_up = self.env_steps < self._cfg.learning_starts
        return tf.where(warming_up, random, policy)

    def stored_action(self, action):
        return self.actor.from_env(action)  # [B, A] in [-1, 1]

    # Learn.

    def gradient_step(self) -> dict[str, tf.Tensor]:
        cfg = self._cfg
        _, _, batch = self.sample()
        draw = self.noise.uniform([4, cfg.batch_size, self._action_size])  # [4, N, A]
        noise = squashed_gaussian.normal_from_uniforms(draw[0], draw[1])  # [N, A], at s
        next_noise = squashed_gaussian.normal_from_uniforms(draw[2], draw[3])  # [N, A], at s'
        alpha = tf.exp(tf.convert_to_tensor(self.log_alpha))  # Before its step, as SB3.
        with tf.GradientTape() as actor_tape:
            action, log_prob = self.actor.sample(batch["observ"], noise)  # [N, A], [N]
            with actor_tape.stop_recording():
                alpha_loss = self._temperature_step(log_prob)
                critic_loss, q_mean = self._critic_step(batch, next_noise, alpha)
            q1, q2 = self.critic(batch["observ"], action)  # After their step (SB3's order).
            actor_loss = losses.actor_loss(log_prob, q1, q2, alpha)
        variables = self.actor.trainable_variables
        gradients = actor_tape.gradient(actor_loss, variables)
        self.actor_optimizer.apply_gradients(zip(gradients, variables))
        self.updates.assign_add(1)
        if cfg.target_update_interval == 1:
            self._update_targets()
        else:
            due = self.updates % cfg.target_update_interval == 0
            tf.cond(due, self._update_targets, lambda: None)
        return {
            "actor_loss": actor_loss,
            "critic_loss": critic_loss,
            "alpha": alpha,
            "alpha_loss": alpha_loss,
            "entropy": -tf.reduce_mean(log_prob),
            "q_mean": q_mean,
        }

    def _temperature_step(self, log_prob) -> tf.Tensor:
        """One Adam step on log alpha (with `ent_coef: auto`); returns its loss."""
        if not self._learn_alpha:
            return tf.constant(0.0)
        with tf.GradientTape() as tape:
            loss = losses.temperature_loss(self.log_alpha, log_prob, self._target_entropy)
        gradient = tape.gradient(loss, self.log_alpha)
        self.alpha_optimizer.apply_gradients([(gradient, self.log_alpha)])
        return loss

    def _critic_step(self, batch, next_noise, alpha) -> tuple[tf.Tensor, tf.Tensor]:
        """One Adam step on both critics toward the soft targets; returns loss and mean Q."""
        next_action, next_log_prob = self.actor.sample(batch["next_observ"], next_noise)
        next_q1, next_q2 = self.target_critic(batch["next_observ"], next_action)  # [N] each
        target = targets.soft_q_targets(
            batch["reward"], batch["discount"], next_q1, next_q2, next_log_prob, alpha
        )  # [N]
        with tf.GradientTape() as tape:
            q1, q2 = self.critic(batch["observ"], batch["action"])  # [N] each
            loss = losses.critic_loss(q1, q2, target)
        variables = self.critic.trainable_variables
        gradients = tape.gradient(loss, variables)
        self.critic_optimizer.apply_gradients(zip(gradients, variables))
        return loss, 0.5 * (tf.reduce_mean(q1) + tf.reduce_mean(q2))

    def _update_targets(self):
        polyak(self.target_critic.variables, self.critic.variables, self._cfg.tau)

    # The policy, for evaluation and export.

    def act(self, observ, deterministic: bool = True):
        """Environment actions [N, ...] for observations [N, ...]: the squashed mean scaled
        to the bounds, or a sample of the policy when not deterministic."""
        if deterministic:
            return self.actor.to_env(self.actor.mode(observ))
        draw = self.exploration.uniform(tf.stack([2, tf.shape(observ)[0], self._action_size]))
        noise = squashed_gaussian.normal_from_uniforms(draw[0], draw[1])  # [N, A]
        return self.actor.to_env(self.actor.sample(observ, noise)[0])


def check_action_space(name: str, config, space) -> None:
    """Raises ConfigError unless `space` is a bounded Box (SAC and TD3 squash into it)."""
    if not isinstance(space, gym.spaces.Box):
        raise ConfigError(
            f"algorithm.name={name} needs a Box action space; env.id={config.env.id!r} has "
            f"{space}. DQN trains discrete actions."
        )
    if not space.is_bounded():
        raise ConfigError(
            f"algorithm.name={name} needs a bounded Box action space (it squashes actions "
            f"into the bounds); env.id={config.env.id!r} has {space}."
        )


def _is_auto_or_positive(value) -> bool:
    return value in (None, "auto") or _is_number(value) and value > 0


def _is_auto_or_number(value) -> bool:
    return value in (None, "auto") or _is_number(value)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
