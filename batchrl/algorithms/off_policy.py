"""What DQN and SAC share: n-step windows into replay, the update schedule, the summaries."""

from __future__ import annotations

import abc
from typing import Any

import tensorflow as tf

from batchrl.config import ConfigError, check_choice
from batchrl.config.config import check_range
from batchrl.core import Algorithm, Policy
from batchrl.parts import summary
from batchrl.parts.untracked import Untracked
from batchrl.replay import (
    NStep,
    PrioritizedReplay,
    StepReplay,
    UniformReplay,
    checkpointing,
    transition_spec,
)


class OffPolicy(Algorithm, Policy, abc.ABC):
    """An algorithm that learns from a replay buffer, driven by `simulate`.

    `experience` writes the B steps of a step into the replay buffer, which turns them
    into n-step transitions (`StepReplay`, or `NStep` before a buffer of whole
    transitions). `simulate` calls `update` every `train_freq` batched steps
    (`steps_to_update`); once the buffer holds `learning_starts` transitions (and a
    batch), or is full, it runs `before_learning` and `gradient_steps` calls of
    `gradient_step` in one `tf.while_loop`, and writes the means of their metrics and
    `summary_values()` as the scalars `<config_section>/<name>`. A subclass reads its keys
    from `config[config_section]`, calls `make_buffers` in its constructor, and writes
    `stored_action`, `gradient_step` (which draws its batch with `sample`) and, if it
    needs them, `before_learning` and `summary_values`. `METRICS` name what
    `gradient_step` returns; `SUMMARIES` every scalar written (the metrics first).
    """

    autograph = False  # Control flow is written with tf.cond and tf.while_loop.
    METRICS: tuple[str, ...] = ()
    SUMMARIES: tuple[str, ...] = ()
    # The ranges of the keys every off-policy section has; a subclass adds its own.
    RANGES = {
        "buffer_size": (lambda x: x >= 1, ">= 1"),
        "batch_size": (lambda x: x >= 1, ">= 1"),
        "learning_starts": (lambda x: x >= 0, ">= 0"),
        "train_freq": (lambda x: x >= 1, ">= 1 (batched steps)"),
        "gradient_steps": (lambda x: x >= 1, ">= 1"),
        "learning_rate": (lambda x: x > 0, "> 0"),
        "discount": (lambda x: 0 <= x <= 1, "in [0, 1]"),
        "n_step": (lambda x: x >= 1, ">= 1"),
        "tau": (lambda x: 0 < x <= 1, "in (0, 1]"),
    }
    OBSERV_DTYPES = ("float32", "uint8")

    @classmethod
    def check_sections(cls, config, ranges: dict) -> None:
        """Checks the section's shared keys and `ranges` (its own), and the buffer's size.

        Raises:
          ConfigError: naming the first key whose value is out of range.
        """
        name = cls.config_section
        cfg = config[name]
        check_choice(f"{name}.checkpoint_replay", cfg.checkpoint_replay, checkpointing.CHOICES)
        check_choice(f"{name}.observ_dtype", cfg.observ_dtype, cls.OBSERV_DTYPES)
        check_range(cfg, name, {**cls.RANGES, **ranges})
        if cfg.batch_size > cfg.buffer_size:
            raise ConfigError(
                f"{name}.batch_size={cfg.batch_size} must be at most {name}.buffer_size="
                f"{cfg.buffer_size}."
            )
        if config.env.num_envs > cfg.buffer_size:
            raise ConfigError(
                f"env.num_envs={config.env.num_envs} must be at most {name}.buffer_size="
                f"{cfg.buffer_size}: each step adds one transition per environment."
            )
        least = config.env.num_envs * (2 * cfg.n_step + 2)
        if cfg.compact_replay and cfg.buffer_size < least:
            raise ConfigError(
                f"{name}.buffer_size={cfg.buffer_size} must be at least env.num_envs * "
                f"(2 * {name}.n_step + 2) = {least} with {name}.compact_replay: each "
                "environment gets a column of buffer_size / num_envs slots."
            )
        cls._check_learning_starts(config)

    @classmethod
    def _check_learning_starts(cls, config) -> None:
        """Refuses a `learning_starts` larger than the buffer: updates would never start.

        On Ray (Ape-X) the learner samples from replay shards and keeps no buffer of its
        own, so the section's `buffer_size` does not bound it.
        """
        name = cls.config_section
        cfg = config[name]
        if config.runner.name != "ray" and cfg.learning_starts > cfg.buffer_size:
            raise ConfigError(
                f"{name}.learning_starts={cfg.learning_starts} must be at most "
                f"{name}.buffer_size={cfg.buffer_size}: updates wait until the buffer holds "
                "learning_starts transitions (or is full), which it never would."
            )

    def make_buffers(
        self,
        action: tf.TensorSpec,
        seed: int,
        prioritized: bool = False,
        observ_dtype: tf.DType = tf.float32,
    ) -> None:
        """Sets up the replay buffer (with its n-step window) and the counters.

        Call it from the constructor once `_cfg` (the algorithm's config section: `n_step`,
        `discount`, `buffer_size`, `compact_replay`, `observ_dtype`, `checkpoint_replay`,
        the schedule's keys and, with `prioritized`, `priority_alpha` and
        `priority_epsilon`), `_batch_size` (B) and `_observ_shape` are set.

        With `compact_replay` the buffer is a `StepReplay`, which stores each observation
        once; otherwise an `NStep` window feeding a `UniformReplay` or `PrioritizedReplay`
        of whole transitions. Both sample the same transitions, the same way.

        Args:
          action: the spec of one action as the buffer stores it (`stored_action`).
          seed: the seed of the buffer's sampling.
          prioritized: sample by priority (Schaul et al. 2016) rather than uniformly.
          observ_dtype: the dtype `sample` gives observations in, whatever dtype the
            buffer keeps (`observ_dtype` of the section): the environment's, so that
            uint8 frames reach the network as uint8 (which scales them to [0, 1]).
        """
        cfg = self._cfg
        self._sampled_observ_dtype = observ_dtype
        observ = tf.TensorSpec(self._observ_shape, tf.as_dtype(cfg.observ_dtype))
        priority = (cfg.priority_alpha, cfg.priority_epsilon) if prioritized else ()
        if cfg.compact_replay:
            replay = StepReplay(
                cfg.buffer_size, observ, action, self._batch_size, cfg.n_step, cfg.discount,
                prioritized, *priority, seed=seed,
            )  # fmt: skip
            buffers = {"replay": replay}
        else:
            spec = transition_spec(observ, action)
            if prioritized:
                replay = PrioritizedReplay(cfg.buffer_size, spec, *priority, seed=seed)
            else:
                replay = UniformReplay(cfg.buffer_size, spec, seed=seed)
            n_step = NStep(cfg.n_step, cfg.discount, self._batch_size, spec)
            buffers = {"n_step": n_step, "replay": replay}
        self._buffers = Untracked(buffers)
        if checkpointing.saves_buffers(cfg.checkpoint_replay, list(buffers.values())):
            self.replay_state = dict(buffers)  # What checkpoints save.
        # Environment steps this algorithm has seen (schedules follow it within a training
        # call), batched steps since the last update, and gradient steps.
        self.env_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="env_steps")
        self._since_update = tf.Variable(0, trainable=False, name="since_update")
        self.updates = tf.Variable(0, dtype=tf.int64, trainable=False, name="updates")
        latest = {name: tf.Variable(0.0, trainable=False) for name in self.SUMMARIES}
        self._latest = Untracked(latest)

    @property
    def replay(self):
        """The replay buffer: `StepReplay`, `UniformReplay` or `PrioritizedReplay`."""
        return self._buffers.variables["replay"]

    def sample(self, beta: float | tf.Tensor = 0.0) -> tuple[tf.Tensor, tf.Tensor, dict]:
        """A batch of `batch_size` transitions: indices, importance weights and the
        transitions, their observations in `make_buffers`' `observ_dtype` whatever dtype
        the buffer keeps (a cast: uint8 frames kept as float32 are whole numbers)."""
        indices, weights, batch = self.replay.sample(self._cfg.batch_size, beta)
        for key in ("observ", "next_observ"):
            batch[key] = tf.cast(batch[key], self._sampled_observ_dtype)
        return indices, weights, batch

    # Store.

    def begin_episodes(self, agent_indices):
        # Windows stop at the episode ends the environments report by themselves (`NStep`).
        # An episode that begins where the last one did not end is a restart the
        # environments did not report (a resume on Gymnasium's environments, whose state
        # no checkpoint holds): the last one is ended as if truncated at its last step, so
        # that no window adds rewards of the new episode and no transition bootstraps from
        # its observations. Everywhere else this changes nothing.
        if self._cfg.compact_replay:
            self.replay.truncate(agent_indices)
        else:
            self._buffers.variables["n_step"].truncate(agent_indices)

    @tf.autograph.experimental.do_not_convert
    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        del agent_indices  # `simulate` passes every agent, in order, at every step.
        dtype = tf.as_dtype(self._cfg.observ_dtype)
        step = (
            tf.cast(observ, dtype),
            self.stored_action(action),
            reward,
            terminated,
            truncated,
            tf.cast(next_observ, dtype),
        )
        if self._cfg.compact_replay:
            self.replay.push(*step)  # Writes past its columns where a step makes none.
        else:
            self._push_and_add(step)
        self._since_update.assign_add(1)
        self.env_steps.assign_add(self._batch_size)

    def _push_and_add(self, step):
        valid, transition = self._buffers.variables["n_step"].push(*step)
        if self._cfg.n_step == 1:
            self.replay.add(transition)
        else:
            # The first n - 1 steps of a run finish no window; after them every step does.
            # (Under XLA a write inside tf.cond copies the whole buffer at every step.)
            tf.cond(valid[0], lambda: self._add(transition), lambda: None)

    def _add(self, transition):
        self.replay.add(transition)

    def end_episodes(self, agent_indices):
        del agent_indices

    @abc.abstractmethod
    def stored_action(self, action: tf.Tensor) -> tf.Tensor:
        """The environment's actions [B, ...] as the buffer stores them."""

    # Learn.

    def steps_to_update(self):
        return self._cfg.train_freq - self._since_update.read_value()

    @tf.autograph.experimental.do_not_convert
    def update(self):
        self._since_update.assign(0)
        cfg = self._cfg
        needed = max(cfg.batch_size, cfg.learning_starts)  # At most buffer_size (checked).
        # A full StepReplay holds fewer transitions than its capacity (`StepReplay`).
        ready = (self.replay.size() >= needed) | self._replay_full()
        tf.cond(ready, self._learn, lambda: None)

    def _replay_full(self) -> tf.Tensor:
        """Whether the buffer is full: bool scalar. A `StepReplay` is full once every
        column's slots are in use; it then holds C - 1 - n transitions per column of C
        slots, one fewer per episode end in it."""
        replay = self.replay
        if isinstance(replay, StepReplay):
            return tf.reduce_min(replay.filled) >= replay.column
        return replay.size() >= replay.capacity

    def _learn(self):
        self.before_learning()
        steps = self._cfg.gradient_steps

        def body(count, metrics):
            new = self.gradient_step()
            return count + 1, {k: metrics[k] + new[k] / steps for k in metrics}

        _, metrics = tf.while_loop(
            lambda count, _: count < steps,
            body,
            (tf.constant(0), {name: tf.constant(0.0) for name in self.METRICS}),
            parallel_iterations=1,
        )
        values = dict(
            metrics,
            **self.summary_values(),
            buffer_size=tf.cast(self.replay.size(), tf.float32),
            updates=tf.cast(self.updates, tf.float32),
        )
        for name, value in values.items():
            summary.scalar(f"{self.config_section}/{name}", value)
            self._latest.variables[name].assign(value)

    def before_learning(self) -> None:
        """Runs once at the start of each update that learns (DQN: the target's copy)."""

    @abc.abstractmethod
    def gradient_step(self) -> dict[str, tf.Tensor]:
        """One gradient step on a sampled batch, counted in `updates`; returns the scalars
        named in `METRICS`."""

    def summary_values(self) -> dict[str, Any]:
        """Further scalars to write after an update, besides `buffer_size` and `updates`."""
        return {}

    def summaries(self) -> dict[str, tf.Tensor]:
        """The scalars the latest update wrote, {'<section>/<name>': value}, as tensors.

        A training call that XLA compiles records no summaries; the local runner returns
        these from it, and the train loop writes them.
        """
        section = self.config_section
        return {f"{section}/{name}": v.read_value() for name, v in self._latest.variables.items()}
