"""BatchPPO: proximal policy optimization with experience and updates in the graph."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import tensorflow as tf
from tensorflow.python.ops import control_flow_util  # No public API tells an XLA context.

from batchrl.algorithms.ppo import utility
from batchrl.core import Algorithm
from batchrl.tools import summary
from batchrl.tools.config import check_choice
from batchrl.tools.networks import MLP, PolicyHead
from batchrl.tools.normalizer import StreamingNormalizer
from batchrl.tools.recurrent import RecurrentNetwork

OBJECTIVES = ("clip", "kl_penalty")
UPDATE_MODES = ("steps", "episodes")
NETWORKS = ("feedforward", "gru", "lstm")
SCHEDULES = ("constant", "linear")
METRICS = ("policy_loss", "value_loss", "entropy", "clip_fraction", "grad_norm")


class PPO(Algorithm):
    """Proximal policy optimization for a batch of environments, driven by `simulate`.

    The algorithm reads like the papers (Schulman et al. 2017; Hafner et al. 2017):

    1. Collect: `perform` samples actions from the Gaussian or categorical policy and
       `experience` stores normalized transitions in variables.
    2. When `update_every` episodes have finished (update_mode 'episodes', as BatchPPO
       does) or every environment has taken `rollout_length` steps (update_mode 'steps',
       as SB3 and CleanRL do), compute GAE(lambda) advantages with Gymnasium's semantics:
       no bootstrap after termination, a bootstrap from the final observation after
       truncation, and after a rollout boundary.
    3. Update the policy and value networks for `epochs` passes over shuffled
       minibatches, with the clipped objective or BatchPPO's adaptive KL penalty.
    4. Report losses, KL, clip fraction, explained variance and more via `tf.summary`.

    Losses are means over the valid steps of a minibatch.

    The graph code writes its control flow explicitly (`tf.cond`, `tf.while_loop`), and
    the four interface methods are marked `do_not_convert`: autograph's rewriting of
    them and of everything they call took 3 of the 7 s that tracing a `pendulum`
    training call took.
    """

    def __init__(self, batch_env, config, step: tf.Variable | None = None, seed: int = 0):
        """Creates networks, optimizer and experience buffers.

        Args:
          batch_env: the in-graph batch environment (`InGraphEnv`) to learn in.
          config: the run's `Config`; PPO reads `config.algorithm` and, for the
            learning-rate schedule, `config.train.total_steps`.
          step: int64 variable counting environment steps, for the learning-rate
            schedule; None keeps the rate constant.
          seed: seed of the algorithm's random stream (sampling and shuffling).

        Raises:
          ConfigError: on a config value outside its valid choices.
        """
        super().__init__()
        cfg = config.algorithm
        check_choice("algorithm.objective", cfg.objective, OBJECTIVES)
        check_choice("algorithm.update_mode", cfg.update_mode, UPDATE_MODES)
        check_choice("algorithm.network", cfg.network, NETWORKS)
        check_choice("algorithm.learning_rate_schedule", cfg.learning_rate_schedule, SCHEDULES)
        self.recurrent = cfg.network != "feedforward"
        if self.recurrent and cfg.update_mode != "steps":
            raise ValueError(
                f"algorithm.network={cfg.network!r} needs algorithm.update_mode='steps'; "
                "recurrent policies train on fixed-length rollouts."
            )
        if cfg.conv_filters:
            raise ValueError(
                f"algorithm.conv_filters={list(cfg.conv_filters)} is read by IMPALA only; "
                "PPO's networks take vector observations (use conv_filters: [])."
            )
        self._cfg = cfg
        self._total_steps = int(config.train.total_steps)
        self._step = step
        self._batch_size = len(batch_env)
        observation_space = batch_env.observation_space
        action_space = batch_env.action_space
        self._observ_shape = tuple(observation_space.shape)
        self._rng = tf.random.Generator.from_seed(seed)

        self.observ_normalizer = StreamingNormalizer(
            self._observ_shape, center=True, scale=True, clip=cfg.observ_clip, name="observ"
        )
        self.reward_normalizer = StreamingNormalizer(
            (), center=False, scale=True, clip=cfg.reward_clip, name="reward"
        )
        self.head = PolicyHead(action_space, cfg.squash_mean, cfg.init_log_std)
        dummy = tf.zeros((1,) + self._observ_shape)
        if self.recurrent:
            self.policy = RecurrentNetwork(
                cfg.network,
                cfg.recurrent_units,
                cfg.policy_layers,
                self.head.size,
                cfg.activation,
                0.01,
                "policy",
            )
            self.policy(dummy, self.policy.initial_state(1))
            # The state of each agent's policy, and the states at the start of the rollout
            # and whether each step began an episode, to replay the rollout in the update.
            self._state = _zeros([self._batch_size, self.policy.state_size])
            self._rollout_state = _zeros([self._batch_size, self.policy.state_size])
            self._first = _zeros([self._batch_size], tf.bool)
        else:
            self.policy = MLP(cfg.policy_layers, self.head.size, cfg.activation, 0.01, "policy")
            self.policy(dummy)
        self.value = MLP(cfg.value_layers, 1, cfg.activation, 1.0, "value")
        self.value(dummy)
        self._trainable = (
            self.policy.trainable_variables
            + self.value.trainable_variables
            + self.head.trainable_variables
        )
        self.optimizer = tf.keras.optimizers.Adam(cfg.learning_rate, epsilon=1e-5)
        self.optimizer.build(self._trainable)
        # XLA fuses the many small ops of a minibatch step (layers, losses, clipping and
        # Adam); in update_mode 'episodes' the minibatch shape changes with every update,
        # and XLA would compile again each time.
        self._jit_minibatch = None
        if cfg.jit_update and cfg.update_mode == "steps":
            self._jit_minibatch = tf.function(self._train_minibatch, jit_compile=True)
        self.penalty = tf.Variable(float(cfg.kl_init_penalty), trainable=False, name="penalty")
        self._discounted_return = tf.Variable(tf.zeros([self._batch_size]), trainable=False)

        # The latest action of each agent: the raw sample and the policy output it came
        # from. `experience` stores these, since the environment sees a clipped action.
        sample_shape, sample_dtype = self.head.sample_spec()
        self._sample_shape, self._sample_dtype = sample_shape, sample_dtype
        self._last_sample = _zeros((self._batch_size,) + sample_shape, sample_dtype)
        self._last_output = _zeros((self._batch_size, self.head.size))
        if cfg.update_mode == "steps":
            self._length = cfg.rollout_length
            self._slots = self._batch_size
        else:
            self._length = cfg.max_episode_length
            # Episodes that end in the same step as the update_every-th one are kept too.
            self._slots = cfg.update_every + self._batch_size
            self._buffer = self._make_buffers(self._length, self._batch_size)  # [L, B, ...]
            self._buffer_length = _zeros([self._batch_size], tf.int32)
            self._memory_count = tf.Variable(0, trainable=False)
        # Time-major memory [T, slots, ...] the update reads.
        self._memory = self._make_buffers(self._length, self._slots)
        self._memory_length = _zeros([self._slots], tf.int32)
        self._rollout_step = tf.Variable(0, trainable=False)

    def _make_buffers(self, rows, columns):
        shape = (rows, columns)
        return {
            "observ": _zeros(shape + self._observ_shape),
            "next_observ": _zeros(shape + self._observ_shape),
            "sample": _zeros(shape + self._sample_shape, self._sample_dtype),
            "output": _zeros(shape + (self.head.size,)),
            "reward": _zeros(shape),
            "terminated": _zeros(shape, tf.bool),
            "truncated": _zeros(shape, tf.bool),
            "first": _zeros(shape, tf.bool),
        }

    # Collect.

    @tf.autograph.experimental.do_not_convert
    def begin_episodes(self, agent_indices):
        if self.recurrent:
            rows = agent_indices[:, None]
            self._state.scatter_nd_update(rows, self.initial_state(tf.size(agent_indices)))
            self._first.scatter_nd_update(rows, tf.ones_like(agent_indices, tf.bool))
        if self._cfg.update_mode == "episodes":
            self._buffer_length.scatter_nd_update(
                agent_indices[:, None], tf.zeros_like(agent_indices)
            )

    @tf.autograph.experimental.do_not_convert
    def perform(self, agent_indices, observ):
        observ = self.observ_normalizer.normalize(observ)  # [K, O]
        if self.recurrent:
            state = tf.gather(self._state, agent_indices)  # [K, S]
            rows = agent_indices[:, None]

            def remember_start():
                self._rollout_state.scatter_nd_update(rows, state)

            tf.cond(self._rollout_step == 0, remember_start, lambda: None)
            output, state = self.policy(observ, state)  # [K, size], [K, S]
            self._state.scatter_nd_update(rows, state)
        else:
            output = self.policy(observ)  # [K, size]
        sample = self.head(output).sample(seed=self._seed())  # [K, ...]
        sample = tf.cast(sample, self._sample_dtype)
        rows = agent_indices[:, None]
        self._last_sample.scatter_nd_update(rows, sample)
        self._last_output.scatter_nd_update(rows, output)
        return self.head.to_env_action(sample)

    @tf.autograph.experimental.do_not_convert
    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        del action  # The raw sample from `perform` is stored instead of the clipped action.
        done = tf.logical_or(terminated, truncated)  # [K]
        norm_observ = self.observ_normalizer.normalize(observ)  # [K, O]
        norm_next_observ = self.observ_normalizer.normalize(next_observ)  # [K, O]
        self.observ_normalizer.update(observ)
        reward = self._scale_reward(agent_indices, reward, done)  # [K]
        step = {
            "observ": norm_observ,
            "next_observ": norm_next_observ,
            "sample": tf.gather(self._last_sample, agent_indices),
            "output": tf.gather(self._last_output, agent_indices),
            "reward": reward,
            "terminated": terminated,
            "truncated": truncated,
            "first": tf.gather(self._first, agent_indices) if self.recurrent else done & False,
        }
        if self.recurrent:
            self._first.scatter_nd_update(agent_indices[:, None], tf.zeros_like(done))
        if self._cfg.update_mode == "steps":
            self._store_step(agent_indices, step)
        else:
            self._store_episode_step(agent_indices, step)

    @tf.autograph.experimental.do_not_convert
    def end_episodes(self, agent_indices):
        if self._cfg.update_mode == "episodes":
            self._finish_episodes(agent_indices)

    def _scale_reward(self, agent_indices, reward, done):
        """Divides rewards by the running std of the discounted return (as SB3 does)."""
        if not self._cfg.normalize_reward:
            return reward
        ret = tf.gather(self._discounted_return, agent_indices) * self._cfg.discount + reward
        self.reward_normalizer.update(ret)
        ret = tf.where(done, tf.zeros_like(ret), ret)
        self._discounted_return.scatter_nd_update(agent_indices[:, None], ret)
        return self.reward_normalizer.normalize(reward)

    def _store_step(self, agent_indices, step):
        """Writes one step for all agents; updates when the rollout is full."""
        t = self._rollout_step
        for key, value in step.items():
            rows = tf.stack([tf.fill(tf.shape(agent_indices), t), agent_indices], 1)
            self._memory[key].scatter_nd_update(rows, value)
        self._rollout_step.assign_add(1)

        def update():
            self._memory_length.assign(tf.fill([self._slots], self._length))
            self._update(self._slots)
            self._rollout_step.assign(0)

        tf.cond(self._rollout_step >= self._length, update, lambda: None)

    def _store_episode_step(self, agent_indices, step):
        """Appends one step to each agent's running episode, up to max_episode_length."""
        position = tf.gather(self._buffer_length, agent_indices)  # [K]
        keep = position < self._length  # [K]
        # An episode cut by the buffer ends as a truncation: it bootstraps from there.
        step["truncated"] = tf.logical_or(
            step["truncated"],
            tf.logical_and(position == self._length - 1, tf.logical_not(step["terminated"])),
        )
        rows = tf.boolean_mask(tf.stack([position, agent_indices], 1), keep)
        for key, value in step.items():
            self._buffer[key].scatter_nd_update(rows, tf.boolean_mask(value, keep))
        self._buffer_length.scatter_nd_add(agent_indices[:, None], tf.cast(keep, tf.int32))

    def _finish_episodes(self, agent_indices):
        """Moves finished episodes into memory; updates once update_every are there."""
        count = tf.shape(agent_indices)[0]
        slots = self._memory_count + tf.range(count)  # [K]
        for key, buffer in self._buffer.items():
            episodes = tf.gather(buffer, agent_indices, axis=1)  # [L, K, ...]
            memory = tf.transpose(self._memory[key], _swap(buffer.shape.rank))
            memory = tf.tensor_scatter_nd_update(
                memory, slots[:, None], tf.transpose(episodes, _swap(buffer.shape.rank))
            )
            self._memory[key].assign(tf.transpose(memory, _swap(buffer.shape.rank)))
        lengths = tf.gather(self._buffer_length, agent_indices)
        self._memory_length.scatter_nd_update(slots[:, None], lengths)
        self._memory_count.assign_add(count)

        def update():
            self._update(self._memory_count)
            self._memory_count.assign(0)

        tf.cond(self._memory_count >= self._cfg.update_every, update, lambda: None)

    # Advantages and update.

    def _update(self, columns):
        """Trains on the first `columns` columns of the time-major memory."""
        cfg = self._cfg
        data = {key: value[:, :columns] for key, value in self._memory.items()}
        mask = tf.range(self._length)[:, None] < self._memory_length[None, :columns]  # [T, N]
        value = self._value(data["observ"])  # [T, N]
        next_value = self._value(data["next_observ"])  # [T, N]
        advantage = utility.gae(
            data["reward"],
            value,
            next_value,
            data["terminated"],
            data["truncated"],
            cfg.discount,
            cfg.gae_lambda,
        )  # [T, N]
        target = advantage + value  # [T, N]
        if cfg.normalize_advantage:
            mean = utility.masked_mean(advantage, mask)
            std = tf.sqrt(utility.masked_mean(tf.square(advantage - mean), mask))
            advantage = (advantage - mean) / (std + 1e-8)
        old_log_std = None if self.head.size == 0 else tf.identity(self._log_std())
        batch = {
            "observ": data["observ"],
            "sample": data["sample"],
            "output": data["output"],
            "advantage": advantage,
            "target": target,
            "old_value": value,
            "first": data["first"],
        }
        if self.recurrent:
            # Minibatches of whole rollouts (columns), replayed from their first state.
            metrics = self._train_epochs(batch, old_log_std, columns, self._rollout_state)
            kl = self._mean_kl(dict(batch, state=self._rollout_state[:columns]), old_log_std)
        elif cfg.update_mode == "steps":
            # Every step of a rollout is valid: static shapes, which XLA compiles well.
            total = self._length * self._slots
            batch = {key: tf.reshape(v, (total,) + v.shape[2:]) for key, v in batch.items()}
            metrics = self._train_epochs(batch, old_log_std, total)
            kl = self._mean_kl(batch, old_log_std)
        else:
            valid = tf.where(mask)  # [M, 2]
            batch = {key: tf.gather_nd(value, valid) for key, value in batch.items()}
            total = tf.shape(valid)[0]
            metrics = self._train_epochs(batch, old_log_std, total)
            kl = self._mean_kl(batch, old_log_std)
        if cfg.objective == "kl_penalty":
            self.penalty.assign(utility.update_penalty_coefficient(self.penalty, kl, cfg.kl_target))
        explained = utility.explained_variance(value, target, mask)
        self._write_summaries(metrics, kl, explained, data["reward"], mask)

    def _train_epochs(self, batch, old_log_std, total, states=None):
        """Epochs of minibatch updates over `total` rows of `batch` (columns with `states`).

        Returns the means over all minibatches of the losses and diagnostics.
        """
        cfg = self._cfg
        size = tf.maximum(total // cfg.minibatches, 1)
        axis = 0 if states is None else 1
        self._set_learning_rate()
        train_minibatch = self._train_minibatch
        # Inside a call that XLA already compiles, the nested XLA function is not needed,
        # and TensorFlow 2.21 computes wrong minibatches with it (tests/algorithms/ppo/test_xla.py).
        if self._jit_minibatch is not None and not _in_xla_context():
            train_minibatch = self._jit_minibatch

        def minibatch_step(index, order, metrics):
            indices = order[index * size : (index + 1) * size]
            minibatch = {key: tf.gather(v, indices, axis=axis) for key, v in batch.items()}
            if states is not None:
                minibatch["state"] = tf.gather(states, indices)
            new = train_minibatch(minibatch, old_log_std)
            return index + 1, order, {name: metrics[name] + new[name] for name in METRICS}

        def epoch(count, metrics):
            order = tf.argsort(self._rng.uniform([total]))
            _, _, metrics = tf.while_loop(
                lambda index, *_: index < cfg.minibatches, minibatch_step, (0, order, metrics)
            )
            return count + 1, metrics

        metrics = {name: tf.constant(0.0) for name in METRICS}
        _, metrics = tf.while_loop(lambda count, _: count < cfg.epochs, epoch, (0, metrics))
        return {name: value / (cfg.epochs * cfg.minibatches) for name, value in metrics.items()}

    def _policy_output(self, batch):
        """Policy outputs [M, size] for a batch, and the batch flattened to [M, ...].

        A recurrent policy replays time-major rollouts [T, n, ...] from `batch['state']`.
        """
        if not self.recurrent:
            return self.policy(batch["observ"]), batch
        output = self.policy.unroll(batch["observ"], batch["first"], batch["state"])
        flat = {
            key: tf.reshape(value, [-1] + value.shape[2:].as_list())
            for key, value in batch.items()
            if key != "state"
        }
        return tf.reshape(output, [-1, self.head.size]), flat

    def _train_minibatch(self, batch, old_log_std):
        cfg = self._cfg
        with tf.GradientTape() as tape:
            output, batch = self._policy_output(batch)
            dist = self.head(output)
            old_dist = self.head(batch["output"], old_log_std)
            log_prob = dist.log_prob(batch["sample"])  # [M]
            old_log_prob = old_dist.log_prob(batch["sample"])  # [M]
            if cfg.objective == "clip":
                policy_loss, extra = utility.clipped_surrogate_loss(
                    log_prob, old_log_prob, batch["advantage"], cfg.clip_ratio
                )
                clip_fraction = extra.clip_fraction
            else:
                kl = old_dist.kl_divergence(dist)  # [M]
                policy_loss, _ = utility.kl_penalty_loss(
                    log_prob,
                    old_log_prob,
                    batch["advantage"],
                    kl,
                    self.penalty,
                    cfg.kl_target,
                    cfg.kl_cutoff_factor,
                    cfg.kl_cutoff_coef,
                )
                clip_fraction = tf.constant(0.0)
            value = self._value(batch["observ"])  # [M]
            value_clip = cfg.value_clip if cfg.value_clip > 0 else None
            value_loss = utility.value_loss(value, batch["target"], batch["old_value"], value_clip)
            entropy = tf.reduce_mean(dist.entropy())
            loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy
        variables = self._trainable
        gradients = tape.gradient(loss, variables)
        gradients, grad_norm = tf.clip_by_global_norm(gradients, cfg.max_grad_norm)
        self.optimizer.apply_gradients(zip(gradients, variables))
        return {
            "policy_loss": policy_loss,
            "value_loss": value_loss,
            "entropy": entropy,
            "clip_fraction": clip_fraction,
            "grad_norm": grad_norm,
        }

    def _mean_kl(self, batch, old_log_std):
        output, batch = self._policy_output(batch)
        dist = self.head(output)
        old_dist = self.head(batch["output"], old_log_std)
        return tf.reduce_mean(old_dist.kl_divergence(dist))

    def _seed(self):
        """A fresh stateless seed [2] for tensorflow-probability's samplers."""
        return tf.cast(self._rng.make_seeds(1)[:, 0], tf.int32)

    def _value(self, observ):
        """Values [...] of normalized observations [..., O]."""
        flat = tf.reshape(observ, (-1,) + self._observ_shape)
        return tf.reshape(self.value(flat)[:, 0], tf.shape(observ)[: -len(self._observ_shape)])

    def _log_std(self):
        return getattr(self.head, "log_std", tf.zeros([0]))

    def _set_learning_rate(self):
        rate = self._cfg.learning_rate
        if self._cfg.learning_rate_schedule == "linear" and self._step is not None:
            progress = tf.cast(self._step, tf.float32) / float(self._total_steps)
            rate = rate * tf.maximum(1.0 - progress, 0.0)
        self.optimizer.learning_rate.assign(rate)

    def _write_summaries(self, metrics, kl, explained, reward, mask):
        for name, value in metrics.items():
            summary.scalar(f"ppo/{name}", value)
        summary.scalar("ppo/kl", kl)
        summary.scalar("ppo/penalty_coefficient", self.penalty)
        summary.scalar("ppo/explained_variance", explained)
        summary.scalar("ppo/learning_rate", self.optimizer.learning_rate)
        summary.scalar("ppo/mean_scaled_reward", utility.masked_mean(reward, mask))

    # Evaluation and export.

    def evaluator(self, batch_size: int | None = None) -> Algorithm:
        """An algorithm that acts with this policy's deterministic action and learns nothing.

        Args:
          batch_size: the number of environments it will act in (for a recurrent policy's
            states); defaults to the training batch size.
        """
        return _Evaluator(self, batch_size or self._batch_size)

    def act(self, observ, deterministic: bool = True):
        """Environment actions [N, ...] for raw observations [N, ...] (feed-forward only)."""
        if self.recurrent:
            raise ValueError(
                f"A recurrent policy (algorithm.network={self._cfg.network!r}) needs its "
                "state: use initial_state() and act_recurrent()."
            )
        return self._action(self.policy(self.observ_normalizer.normalize(observ)), deterministic)

    def initial_state(self, batch_size) -> tf.Tensor:
        """The state [N, S] of a recurrent policy at the start of an episode."""
        return self.policy.initial_state(batch_size)

    def act_recurrent(self, observ, state, deterministic: bool = True):
        """Actions [N, ...] and new states [N, S] for raw observations and states."""
        output, state = self.policy(self.observ_normalizer.normalize(observ), state)
        return self._action(output, deterministic), state

    def _action(self, output, deterministic):
        dist = self.head(output)
        sample = dist.mode() if deterministic else dist.sample(seed=self._seed())
        return self.head.to_env_action(tf.cast(sample, self._sample_dtype))


class _Evaluator(Algorithm):
    """Deterministic actions of a PPO policy; experience is ignored."""

    def __init__(self, ppo: PPO, batch_size: int):
        super().__init__(name="evaluator")
        self._ppo = ppo
        if ppo.recurrent:
            self._state = _zeros([batch_size, ppo.policy.state_size])

    def begin_episodes(self, agent_indices):
        if self._ppo.recurrent:
            rows = agent_indices[:, None]
            self._state.scatter_nd_update(rows, self._ppo.initial_state(tf.size(agent_indices)))

    def perform(self, agent_indices, observ):
        if not self._ppo.recurrent:
            return self._ppo.act(observ)
        state = tf.gather(self._state, agent_indices)
        action, state = self._ppo.act_recurrent(observ, state)
        self._state.scatter_nd_update(agent_indices[:, None], state)
        return action

    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        pass

    def end_episodes(self, agent_indices):
        pass


def _zeros(shape, dtype=tf.float32):
    return tf.Variable(tf.zeros(shape, dtype), trainable=False)


def _in_xla_context() -> bool:
    """Whether the graph being built is compiled with XLA (`jit_compile=True`)."""
    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def _swap(rank):
    """The permutation that swaps the first two axes of a tensor of `rank`."""
    return [1, 0] + list(range(2, rank))


def action_space_size(space: gym.Space) -> int:
    return int(space.n) if isinstance(space, gym.spaces.Discrete) else int(np.prod(space.shape))
