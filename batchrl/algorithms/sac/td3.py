"""TD3: twin delayed deep deterministic policy gradients, on SAC's critics and replay."""

from __future__ import annotations

import tensorflow as tf

from batchrl.algorithms.off_policy import OffPolicy
from batchrl.algorithms.sac import losses, squashed_gaussian, targets
from batchrl.algorithms.sac.networks import DeterministicActor, TwinCritic
from batchrl.algorithms.sac.sac import check_action_space
from batchrl.parts import optimizers
from batchrl.parts.polyak import polyak
from batchrl.replay import RandomStream


class TD3(OffPolicy):
    """TD3 for a batch of environments with bounded Box actions, driven by `simulate`.

    Fujimoto, van Hoof, Meger 2018, "Addressing Function Approximation Error in
    Actor-Critic Methods" (https://arxiv.org/abs/1802.09477), Algorithm 1:

    1. Act: `perform` takes the deterministic policy's action plus Gaussian noise of std
       `action_noise` (in [-1, 1] units, clipped to them), scaled to the bounds; uniform
       actions during the first `learning_starts` environment steps.
    2. Store: as SAC, actions mapped to [-1, 1] (`OffPolicy`).
    3. Learn: each gradient step moves the twin critics toward clipped double-Q targets at
       smoothed target actions (`targets.smoothed_target_actions`,
       `targets.clipped_double_q_targets`); every `policy_delay` gradient steps the actor
       climbs Q1 and the target actor and critics take a Polyak step of `tau`.
    4. Report: the losses and Q values.

    It shares SAC's networks (`TwinCritic`), action maps and schedule, and has its own
    config section, `td3`, whose defaults are Stable-Baselines3's TD3 defaults.
    """

    config_section = "td3"
    METRICS = ("actor_loss", "critic_loss", "q_mean")
    SUMMARIES = METRICS + ("buffer_size", "updates")

    @classmethod
    def check_config(cls, config) -> None:
        cls.check_sections(
            config,
            {
                "policy_delay": (lambda x: x >= 1, ">= 1 (gradient steps)"),
                "action_noise": (lambda x: x >= 0, ">= 0"),
                "target_policy_noise": (lambda x: x >= 0, ">= 0"),
                "target_noise_clip": (lambda x: x >= 0, ">= 0"),
            },
        )

    def __init__(self, batch_env, config, step: tf.Variable | None = None, seed: int = 0):
        """Creates the actor, the twin critics, their targets, the optimizers and buffers.

        Args:
          batch_env: the in-graph batch environment (`InGraphEnv`); its action space must
            be a bounded `Box`.
          config: the run's `Config`; TD3 reads `config.td3` and `config.network`
            (`policy_layers` for the actor, `value_layers` for each critic, `activation`).
          step: int64 variable counting environment steps; None counts from 0 here.
          seed: seed of the random streams (acting, target smoothing, replay sampling).

        Raises:
          ConfigError: on a config value or an action space TD3 cannot train with.
        """
        super().__init__()
        self.check_config(config)
        space = batch_env.action_space
        check_action_space("td3", config, space)
        cfg = self._cfg = config.td3
        network = config.network
        del step  # TD3 counts its own environment steps, in `env_steps`.
        self._batch_size = len(batch_env)
        self._observ_shape = tuple(batch_env.observation_space.shape)
        self.exploration = RandomStream(seed + (1 << 32), name="exploration")
        self.noise = RandomStream(seed + (2 << 32), name="noise")

        activation = network.activation
        self.actor = DeterministicActor(network.policy_layers, activation, space)
        self.target_actor = DeterministicActor(network.policy_layers, activation, space, "target")
        self.critic = TwinCritic(network.value_layers, activation, "critic")
        self.target_critic = TwinCritic(network.value_layers, activation, "target_critic")
        self._action_size = size = self.actor.size
        observ = tf.zeros((1,) + self._observ_shape)
        for actor in (self.actor, self.target_actor):
            actor(observ)
        for critic in (self.critic, self.target_critic):
            critic(observ, tf.zeros([1, size]))
        self._update_targets(1.0)
        # PyTorch's Adam epsilon, as Stable-Baselines3 uses it.
        self.actor_optimizer = optimizers.Adam(cfg.learning_rate, epsilon=1e-8)
        self.actor_optimizer.build(self.actor.trainable_variables)
        self.critic_optimizer = optimizers.Adam(cfg.learning_rate, epsilon=1e-8)
        self.critic_optimizer.build(self.critic.trainable_variables)
        self.make_buffers(tf.TensorSpec([size], tf.float32), seed)
        self._actor_loss = tf.Variable(0.0, trainable=False, name="actor_loss")

    # Act.

    @tf.autograph.experimental.do_not_convert
    def perform(self, agent_indices, observ):
        draw = self.exploration.uniform([3, self._batch_size, self._action_size])  # [3, B, A]
        noise = self._cfg.action_noise * squashed_gaussian.normal_from_uniforms(draw[0], draw[1])
        action = tf.clip_by_value(self.actor(observ) + noise, -1.0, 1.0)  # [B, A]
        warming_up = self.env_steps < self._cfg.learning_starts
        return tf.where(warming_up, self.actor.uniform(draw[2]), self.actor.to_env(action))

    def stored_action(self, action):
        return self.actor.from_env(action)  # [B, A] in [-1, 1]

    # Learn.

    def gradient_step(self) -> dict[str, tf.Tensor]:
        cfg = self._cfg
        _, _, batch = self.sample()
        draw = self.noise.uniform([2, cfg.batch_size, self._action_size])  # [2, N, A]
        noise = cfg.target_policy_noise * squashed_gaussian.normal_from_uniforms(draw[0], draw[1])
        next_action = targets.smoothed_target_actions(
            self.target_actor(batch["next_observ"]), noise, cfg.target_noise_clip
        )  # [N, A]
        next_q1, next_q2 = self.target_critic(batch["next_observ"], next_action)  # [N] each
        target = targets.clipped_double_q_targets(
            batch["reward"], batch["discount"], next_q1, next_q2
        )  # [N]
        with tf.GradientTape() as tape:
            q1, q2 = self.critic(batch["observ"], batch["action"])  # [N] each
            # The paper's sum of the two mean squared errors (SAC's loss halves it).
            critic_loss = 2.0 * losses.critic_loss(q1, q2, target)
        variables = self.critic.trainable_variables
        self.critic_optimizer.apply_gradients(zip(tape.gradient(critic_loss, variables), variables))
        self.updates.assign_add(1)
        if cfg.policy_delay == 1:
            self._delayed_step(batch)
        else:
            due = self.updates % cfg.policy_delay == 0
            tf.cond(due, lambda: self._delayed_step(batch), lambda: None)
        return {
            "actor_loss": self._actor_loss.read_value(),  # The latest delayed step's.
            "critic_loss": critic_loss,
            "q_mean": 0.5 * (tf.reduce_mean(q1) + tf.reduce_mean(q2)),
        }

    def _delayed_step(self, batch):
        """The actor's step up Q1 (its loss -mean Q1(s, pi(s))), then the targets' step."""
        with tf.GradientTape() as tape:
            q1, _ = self.critic(batch["observ"], self.actor(batch["observ"]))
            loss = -tf.reduce_mean(q1)
        variables = self.actor.trainable_variables
        self.actor_optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        with tf.control_dependencies([self._actor_loss.assign(loss)]):
            self._update_targets(self._cfg.tau)

    def _update_targets(self, tau):
        polyak(self.target_actor.variables, self.actor.variables, tau)
        polyak(self.target_critic.variables, self.critic.variables, tau)

    # The policy, for evaluation and export.

    def act(self, observ, deterministic: bool = True):
        """Environment actions [N, ...]: the policy's, plus `action_noise` when not
        deterministic."""
        action = self.actor(observ)  # [N, A]
        if not deterministic:
            draw = self.exploration.uniform(tf.stack([2, tf.shape(observ)[0], self._action_size]))
            noise = self._cfg.action_noise * squashed_gaussian.normal_from_uniforms(
                draw[0], draw[1]
            )
            action = tf.clip_by_value(action + noise, -1.0, 1.0)
        return self.actor.to_env(action)
