"""Synchronous IMPALA: an actor-critic learner with V-trace targets, in the graph."""

from __future__ import annotations

import tensorflow as tf

from batchrl.algorithms.impala import bootstrap, losses, rewards, vtrace
from batchrl.algorithms.impala.behaviour_policy import ImpalaBehaviourPolicy
from batchrl.algorithms.impala.section import check_impala_config
from batchrl.core import Algorithm, Learner, Policy
from batchrl.networks import MLP, batch_apply, make_torso
from batchrl.parts import optimizers, summary
from batchrl.parts.normalizer import RewardScaler
from batchrl.parts.rollout_buffer import RolloutBuffer, transition_spec
from batchrl.parts.schedules import learning_rate
from batchrl.tools.in_graph_env import observ_dtype


class IMPALA(Algorithm, Learner, Policy):
    """IMPALA's learner fed by `simulate`, with one update every `unroll_length` steps.

    The algorithm reads like the paper (Espeholt et al., 2018, Sections 3 and 4):

    1. Act: `perform` samples actions from the behaviour policy mu and keeps its output
       (logits, or the Gaussian mean) and the raw sample for each agent; `experience`
       clips the reward (`reward_clipping`), optionally scales it by the running std of
       the discounted return (`normalize_reward`), and appends the transition to
       time-major unroll buffers [T, B, ...] in variables.
    2. Every T = `unroll_length` steps, in the same graph call, recompute the target
       policy pi and the values V(x_t) on the unroll, and the log importance weights
       log pi(a_t|x_t) - log mu(a_t|x_t).
    3. Compute V-trace targets v_t and policy-gradient advantages, with discount 0 at
       terminal steps and, at truncated steps (time limits), the bootstrap
       gamma * V(final observation) folded into the reward with discount 0 too, so no
       trace crosses into the next episode (`bootstrap.truncation_bootstrap`). The last
       step bootstraps from the value of its next observation.
    4. Take one RMSProp or Adam step on

           L = L_pg + baseline_cost * L_baseline + entropy_cost * L_entropy,

       with global-norm gradient clipping, and report the losses via `tf.summary`.

    Losses are means over the T x B steps of the unroll, not sums as in the authors'
    learner and TorchBeast. A mean keeps the gradient's scale independent of
    `unroll_length` and `num_envs`, so `learning_rate` and `max_grad_norm`, keys IMPALA
    shares with PPO (whose losses are means), mean the same for both and survive a
    change of batch size. The relative weights `baseline_cost` and `entropy_cost` are
    unaffected; with RMSProp, a sum over N steps equals a mean with the learning rate
    unchanged, the gradient clip divided by N, and the epsilon (inside the root, as in
    TensorFlow) divided by N^2.

    In this synchronous form the unroll was collected by the parameters the update
    starts from, so pi = mu and every rho is 1 up to rounding: V-trace reduces to the
    on-policy n-step returns (lambda-returns with `vtrace_lambda` < 1), as the paper
    notes for on-policy data (Section 4.1). The
    importance weights are computed anyway, so that the learner stays correct if acting
    and learning are ever decoupled.

    Control flow is explicit (`tf.cond`), and the interface methods and `learn` are
    marked `do_not_convert`: autograph's rewriting of them took about 4 of the 6 s that
    tracing a `cartpole_impala` training call took.

    With `network.core` (TorchBeast's `--use_lstm`) the policy and the baseline share one
    `CoreNetwork`: a body, an LSTM (or GRU) core and two linear outputs. Each agent's core
    state is carried from step to step and across unrolls, and reset at episode starts
    (s * (1 - first), as TorchBeast). Every unroll stores the state it started from
    (`core_state` [B, S]) and where episodes began (`first` [T, B]); the learner unrolls
    the core over the T steps from that state with the same resets, and bootstraps from
    the value of each next observation with the core's state after the step. With
    `network.core_inputs: [last_action, last_reward]` the core also reads the one-hot
    previous action and the previous clipped reward (TorchBeast's `AtariNet`): the actor
    keeps them in the state's last columns (`experience` writes the reward here), and the
    learner takes them from the unroll's samples and rewards shifted by one step, step
    0's from the stored start state, zeros where an episode begins.

    `perform` and `experience` expect every agent in every call, as `simulate` does.
    With runner `threads`, actors act with copies of `ImpalaBehaviourPolicy` and `learn`
    takes their unrolls.
    """

    config_section = "impala"
    distribution = "actor_learner"  # On Ray: actors with policy copies, and lag.

    @classmethod
    def check_config(cls, config) -> None:
        check_impala_config(config)

    def __init__(self, batch_env, config, step: tf.Variable | None = None, seed: int = 0):
        """Creates networks, optimizer and unroll buffers.

        Args:
          batch_env: the in-graph batch environment (`InGraphEnv`) to learn in.
          config: the run's `Config`; IMPALA reads `config.impala`, `config.network`
            and, for the learning-rate schedule, `config.train.total_steps`.
          step: int64 variable counting environment steps, for the learning-rate
            schedule; None keeps the rate constant.
          seed: seed of the algorithm's random stream (action sampling).

        Raises:
          ConfigError: on a config value outside its valid choices.
        """
        super().__init__()
        self.check_config(config)
        cfg = self._cfg = config.impala
        self._network = network = config.network
        self._total_steps = int(config.train.total_steps)
        self._step = step
        self._batch_size = len(batch_env)
        self._length = int(cfg.unroll_length)
        self._observ_shape = tuple(batch_env.observation_space.shape)
        self._observ_dtype = observ_dtype(batch_env.observation_space)
        self._action_space = batch_env.action_space

        # The acting part, the same module an actor copies: normalizer, head and policy
        # network, and the random stream that samples actions.
        self.actor = self.make_behaviour_policy(seed)
        self.observ_normalizer = self.actor.observ_normalizer
        self.head = self.actor.head
        self.policy = self.actor.policy
        self.reward_scaler = RewardScaler(
            self._batch_size, cfg.discount, clip=cfg.reward_clip, name="reward"
        )
        self.recurrent = self.actor.recurrent
        self.value = None  # With a core or a shared body, `self.policy` holds the baseline.
        if self.recurrent:
            # Each agent's core state, whether its next step begins an episode, and the
            # states the current unroll started from.
            self._state = _zeros([self._batch_size, self.policy.state_size])
            self._first = _zeros([self._batch_size], tf.bool)
            self._unroll_state = _zeros([self._batch_size, self.policy.state_size])
        elif not self.actor.shared_body:
            self.value = MLP(
                network.value_layers,
                1,
                network.activation,
                1.0,
                "value",
                network.conv_filters,
                torso=make_torso(network),
            )
            self.value(tf.zeros((1,) + self._observ_shape))
        # In the order of earlier versions, whose checkpoints hold the optimizer's slots so.
        self._trainable = (
            self.policy.trainable_variables
            + (() if self.value is None else self.value.trainable_variables)
            + self.head.trainable_variables
        )
        self.optimizer = _make_optimizer(cfg)
        self.optimizer.build(self._trainable)

        # The latest action of each agent: the raw sample and the policy output it came
        # from. `experience` stores these, since the environment sees a clipped action.
        self._sample_shape, self._sample_dtype = self.head.sample_spec()
        self._last_sample = _zeros((self._batch_size,) + self._sample_shape, self._sample_dtype)
        self._last_output = _zeros((self._batch_size, self.head.size))
        # Frames (uint8) stay bytes in the unroll unless they are normalized: the
        # networks cast them.
        stored = tf.float32 if cfg.normalize_observ else self._observ_dtype
        spec = transition_spec(
            self._observ_shape,
            stored,
            self._sample_shape,
            self._sample_dtype,
            self.head.size,
            first=self.recurrent,
        )
        self.rollout = RolloutBuffer(self._length, self._batch_size, spec, name="unroll")

    # Act.

    @tf.autograph.experimental.do_not_convert
    def begin_episodes(self, agent_indices):
        if self.recurrent:
            rows = agent_indices[:, None]
            self._state.scatter_nd_update(rows, self.initial_state(tf.size(agent_indices)))
            self._first.scatter_nd_update(rows, tf.ones_like(agent_indices, tf.bool))

    @tf.autograph.experimental.do_not_convert
    def perform(self, agent_indices, observ):
        rows = agent_indices[:, None]
        if self.recurrent:
            state = tf.gather(self._state, agent_indices)  # [K, S]

            def remember_start():
                self._unroll_state.scatter_nd_update(rows, state)

            tf.cond(self.rollout.step == 0, remember_start, lambda: None)
            first = tf.gather(self._first, agent_indices)  # [K]
            action, sample, output, state = self.actor.sample(observ, first, state)
            self._state.scatter_nd_update(rows, state)
        else:
            action, sample, output = self.actor.sample(observ)
        self._last_sample.scatter_nd_update(rows, sample)
        self._last_output.scatter_nd_update(rows, output)
        return action

    @tf.autograph.experimental.do_not_convert
    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        del action  # The raw sample from `perform` is stored instead of the clipped action.
        reward = rewards.clip_rewards(reward, self._cfg.reward_clipping)  # [K]
        if self.recurrent and self.policy.last_reward:  # The next step's core reads it.
            state = self.policy.with_last_reward(tf.gather(self._state, agent_indices), reward)
            self._state.scatter_nd_update(agent_indices[:, None], state)
        if self._cfg.normalize_reward:
            done = tf.logical_or(terminated, truncated)  # [K]
            reward = self.reward_scaler.scale(agent_indices, reward, done)
        step = {
            "observ": self.actor.normalize(observ),
            "next_observ": self.actor.normalize(next_observ),
            "sample": tf.gather(self._last_sample, agent_indices),
            "output": tf.gather(self._last_output, agent_indices),
            "reward": reward,
            "terminated": terminated,
            "truncated": truncated,
        }
        if self.recurrent:
            step["first"] = tf.gather(self._first, agent_indices)
            self._first.scatter_nd_update(agent_indices[:, None], tf.zeros_like(terminated))
        if self._cfg.normalize_observ:
            self.observ_normalizer.update(observ)
        self.rollout.append(agent_indices, step)  # `simulate` calls `update` when full.

    def steps_to_update(self):
        return self.rollout.length - self.rollout.step.read_value()

    @tf.autograph.experimental.do_not_convert
    def update(self):
        unroll = self.rollout.read()
        if self.recurrent:
            unroll["core_state"] = self._unroll_state.read_value()  # [B, S]
        self._learn(unroll)
        self.rollout.clear()

    @tf.autograph.experimental.do_not_convert
    def end_episodes(self, agent_indices):
        pass

    # Targets and update.

    @tf.autograph.experimental.do_not_convert
    def learn(self, batch: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """One learner step on a batch of unrolls that actors collected (asynchronous mode).

        The actors act with copies of the policy (`BehaviourPolicy`) that may lag this
        one; V-trace corrects for the difference. The batch holds raw observations and
        clipped rewards: the learner merges them into its normalizer statistics, then
        normalizes them as `experience` does in the synchronous mode.

        Args:
          batch: time-major tensors [T, B, ...]: `observ`, `next_observ` (raw), `sample`
            and `output` (the behaviour policy's sample and network output),
            `behaviour_log_std` [size] (Box actions only), `reward` (clipped),
            `discounted_return` (each agent's running discounted return after the step,
            restarting at 0 after episode ends, for the reward scale), `terminated` and
            `truncated`; with `network.core` also `first` [T, B] (episode starts) and
            `core_state` [B, S], the core states each column started from.
        """
        observ, reward = batch["observ"], batch["reward"]
        if self._cfg.normalize_observ:
            self.observ_normalizer.update(tf.reshape(observ, (-1,) + self._observ_shape))
        if self._cfg.normalize_reward:
            self.reward_scaler.normalizer.update(tf.reshape(batch["discounted_return"], [-1]))
            reward = self.reward_scaler.normalizer.normalize(reward)
        unroll = dict(batch, reward=reward)
        unroll["observ"] = self.actor.normalize(observ)
        unroll["next_observ"] = self.actor.normalize(batch["next_observ"])
        return self._learn(unroll)

    def behaviour_variables(self) -> list[tf.Variable]:
        """What actors copy into their `ImpalaBehaviourPolicy`, in the order `load` expects."""
        return self.actor.acting_variables()

    def make_behaviour_policy(self, seed: int) -> ImpalaBehaviourPolicy:
        """A copy of the acting part of this algorithm for an actor; load weights into it."""
        return ImpalaBehaviourPolicy(
            self._cfg,
            self._network,
            self._observ_shape,
            self._action_space,
            seed,
            self._observ_dtype,
        )

    def _learn(self, unroll):
        """One gradient step on an unroll [T, B] of normalized observations and rewards."""
        cfg = self._cfg
        rate = learning_rate(
            cfg.learning_rate, cfg.learning_rate_schedule, self._step, self._total_steps
        )
        self.optimizer.learning_rate.assign(rate)
        with tf.GradientTape() as tape:
            total, info = self.loss(unroll)
        gradients = tape.gradient(total, self._trainable)
        gradients, grad_norm = tf.clip_by_global_norm(gradients, self._cfg.max_grad_norm)
        self.optimizer.apply_gradients(zip(gradients, self._trainable))
        for name in ("policy_loss", "baseline_loss", "entropy_loss"):
            summary.scalar(f"impala/{name}", info[name])
        summary.scalar("impala/total_loss", total)
        summary.scalar("impala/entropy", tf.reduce_mean(info["entropy"]))
        summary.scalar("impala/grad_norm", grad_norm)
        summary.scalar("impala/learning_rate", rate)
        summary.scalar("impala/mean_rho", tf.reduce_mean(tf.exp(info["log_rhos"])))
        summary.scalar("impala/mean_vs", tf.reduce_mean(info["vs"]))
        summary.scalar("impala/mean_value", tf.reduce_mean(info["value"]))
        summary.scalar("impala/mean_reward", tf.reduce_mean(unroll["reward"]))
        return {"total_loss": total, "grad_norm": grad_norm}

    def loss(self, unroll: dict[str, tf.Tensor]) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        """The total loss of an unroll [T, B, ...] and what it is made of.

        Returns:
          The scalar total loss and a dict of the three losses (scalars) and the [T, B]
          tensors `value`, `vs`, `pg_advantages`, `log_rhos` and `entropy`.
        """
        cfg = self._cfg
        inner = len(self._observ_shape)
        # The behaviour policy's Gaussian scale: in the synchronous mode the parameters
        # change only after an unroll, so it is the current one.
        log_std = getattr(self.head, "log_std", None)  # None for discrete actions.
        behaviour_log_std = unroll.get("behaviour_log_std")
        if behaviour_log_std is None and log_std is not None:
            behaviour_log_std = tf.stop_gradient(log_std)
        if self.recurrent:
            output, value, states = self.policy.unroll(
                unroll["observ"],
                unroll["first"],
                unroll["core_state"],
                unroll["sample"],
                unroll["reward"],  # Clipped, and not normalized (refused at config load).
            )  # [T, B, size], [T, B], [T, B, S]
            next_value = self.policy.bootstrap_values(unroll["next_observ"], states)  # [T, B]
        else:
            if self.value is None:  # One body for both (network.shared_body).

                def values(observ):  # [N, ...] -> [N]
                    return self.policy.with_value(observ)[1]

                def joint(observ):  # [N, ...] -> [N, size + 1]
                    output, value = self.policy.with_value(observ)
                    return tf.concat([output, value[:, None]], -1)

                both = batch_apply(joint, unroll["observ"], inner)  # [T, B, size + 1]
                output, value = both[..., :-1], both[..., -1]
            else:

                def values(observ):
                    return self.value(observ)[:, 0]

                output = batch_apply(self.policy, unroll["observ"], inner)  # [T, B, size]
                value = batch_apply(values, unroll["observ"], inner)  # [T, B]
            next_value = bootstrap.next_values(
                values, value, unroll["next_observ"], unroll["truncated"], inner
            )
        next_value = tf.stop_gradient(next_value)
        rewards, discounts = bootstrap.truncation_bootstrap(
            unroll["reward"], unroll["terminated"], unroll["truncated"], next_value, cfg.discount
        )  # [T, B] each
        target = self.head(output)
        behaviour = self.head(unroll["output"], behaviour_log_std)
        log_rhos = vtrace.log_rhos_from_distributions(behaviour, target, unroll["sample"])
        returns = vtrace.from_importance_weights(
            log_rhos,
            discounts,
            rewards,
            value,
            bootstrap_value=next_value[-1],
            clip_rho_threshold=cfg.clip_rho_threshold or None,
            clip_pg_rho_threshold=cfg.clip_pg_rho_threshold or None,
            lambda_=cfg.vtrace_lambda,
        )  # [T, B] each
        entropy = target.entropy()  # [T, B]
        info = {
            "policy_loss": losses.policy_gradient_loss(
                target.log_prob(unroll["sample"]), returns.pg_advantages
            ),
            "baseline_loss": losses.baseline_loss(returns.vs, value),
            "entropy_loss": losses.entropy_loss(entropy),
            "value": value,
            "vs": returns.vs,
            "pg_advantages": returns.pg_advantages,
            "log_rhos": log_rhos,
            "entropy": entropy,
        }
        total = (
            info["policy_loss"]
            + cfg.baseline_cost * info["baseline_loss"]
            + cfg.entropy_cost * info["entropy_loss"]
        )
        return total, info

    # The policy, for evaluation and export.

    def act(self, observ, deterministic: bool = True):
        """Environment actions [N, ...] for raw observations [N, ...].

        The deterministic action is the mode of the policy: the argmax of the logits, or
        the Gaussian mean (clipped to the action space).
        """
        if self.recurrent:
            raise ValueError(
                f"A policy with network.core={self._network.core!r} needs its state: use "
                "initial_state() and act_recurrent()."
            )
        if not deterministic:
            return self.actor.sample(observ)[0]
        mode = self.head(self.policy(self.actor.normalize(observ))).mode()
        return self.head.to_env_action(tf.cast(mode, self._sample_dtype))

    def initial_state(self, batch_size) -> tf.Tensor:
        """The core states [N, S] at the start of an episode (zeros)."""
        return self.policy.initial_state(batch_size)

    def act_recurrent(self, observ, state, deterministic: bool = True):
        """Actions [N, ...] and new core states [N, S] for raw observations and states."""
        if not deterministic:
            action, _, _, state = self.actor.sample(
                observ, tf.zeros(tf.shape(state)[:1], tf.bool), state
            )
            return action, state
        output, _, state = self.policy(self.actor.normalize(observ), state)
        mode = tf.cast(self.head(output).mode(), self._sample_dtype)
        return self.head.to_env_action(mode), self.policy.with_last_action(state, mode)

    def observe_reward(self, state, reward):
        """The core states [N, S] with the step's rewards [N], clipped as the learner clips
        them, in their last-reward column (`network.core_inputs: [last_reward]`)."""
        if not (self.recurrent and self.policy.last_reward):
            return state
        reward = rewards.clip_rewards(tf.cast(reward, tf.float32), self._cfg.reward_clipping)
        return self.policy.with_last_reward(state, reward)


def _make_optimizer(cfg):
    """RMSProp as in the paper and TorchBeast, or Adam with PPO's epsilon."""
    if cfg.optimizer == "rmsprop":
        return tf.keras.optimizers.RMSprop(
            cfg.learning_rate,
            rho=cfg.rmsprop_alpha,
            momentum=cfg.rmsprop_momentum,
            epsilon=cfg.rmsprop_epsilon,
        )
    return optimizers.Adam(cfg.learning_rate, epsilon=1e-5)


def _zeros(shape, dtype=tf.float32):
    return tf.Variable(tf.zeros(shape, dtype), trainable=False)
