"""What DQN and SAC share: n-step windows into replay, the update schedule, the summaries."""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from batchrl.config import ConfigError, check_choice
from batchrl.config.run_config import check_range
from batchrl.core import Algorithm, Policy
from batchrl.parts import summary
from batchrl.parts.untracked import Untracked
from batchrl.replay import NStep, checkpointing, transition_spec


class OffPolicy(Algorithm, Policy, abc.ABC):
    """An algorithm that learns from a replay buffer, driven by `simulate`.

    `experience` pushes the B transitions of a step through an n-step window (`NStep`)
    into the replay buffer in one write. `simulate` calls `update` every `train_freq`
    batched steps (`steps_to_update`); once the buffer holds `learning_starts`
    transitions (and a batch), it runs `before_learning` and `gradient_steps` calls of
    `gradient_step` in one `tf.while_loop`, and writes the means of their metrics and
    `summary_values()` as the scalars `<config_section>/<name>`. A subclass reads its keys
    from `config[config_section]`, calls `make_buffers` in its constructor, and writes
    `stored_action`, `gradient_step` and, if it needs them, `before_learning` and
    `summary_values`. `METRICS` name what `gradient_step` returns; `SUMMARIES` every
    scalar written (the metrics first).
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

    @classmethod
    def check_sections(cls, config, ranges: dict) -> None:
        """Checks the section's shared keys and `ranges` (its own), and the buffer's size.

        Raises:
          ConfigError: naming the first key whose value is out of range.
        """
        name = cls.config_section
        cfg = config[name]
        check_choice(f"{name}.checkpoint_replay", cfg.checkpoint_replay, checkpointing.CHOICES)
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

    def make_buffers(self, action: tf.TensorSpec, make_replay: Callable) -> None:
        """Sets up the n-step window, the replay buffer and the counters.

        Call it from the constructor once `_cfg` (the algorithm's config section: `n_step`,
        `discount`, `checkpoint_replay`, `train_freq`, `gradient_steps`, `batch_size`,
        `learning_starts`), `_batch_size` (B) and `_observ_shape` are set.

        Args:
          action: the spec of one action as the buffer stores it (`stored_action`).
          make_replay: builds the replay buffer (`UniformReplay` or `PrioritizedReplay`)
            from the spec of one transition.
        """
        cfg = self._cfg
        spec = transition_spec(tf.TensorSpec(self._observ_shape, tf.float32), action)
        replay = make_replay(spec)
        n_step = NStep(cfg.n_step, cfg.discount, self._batch_size, spec)
        self._buffers = Untracked({"n_step": n_step, "replay": replay})
        if checkpointing.saves_buffers(cfg.checkpoint_replay, [n_step, replay]):
            self.replay_state = {"n_step": n_step, "replay": replay}  # What checkpoints save.
        # Environment steps this algorithm has seen (schedules follow it within a training
        # call), batched steps since the last update, and gradient steps.
        self.env_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="env_steps")
        self._since_update = tf.Variable(0, trainable=False, name="since_update")
        self.updates = tf.Variable(0, dtype=tf.int64, trainable=False, name="updates")
        latest = {name: tf.Variable(0.0, trainable=False) for name in self.SUMMARIES}
        self._latest = Untracked(latest)

    @property
    def replay(self):
        """The replay buffer (`UniformReplay` or `PrioritizedReplay`)."""
        return self._buffers.variables["replay"]

    @property
    def n_step(self) -> NStep:
        return self._buffers.variables["n_step"]

    # Store.

    def begin_episodes(self, agent_indices):
        del agent_indices  # Windows stop at episode ends by themselves (`NStep`).

    @tf.autograph.experimental.do_not_convert
    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        del agent_indices  # `simulate` passes every agent, in order, at every step.
        valid, transition = self.n_step.push(
            tf.cast(observ, tf.float32),
            self.stored_action(action),
            reward,
            terminated,
            truncated,
            tf.cast(next_observ, tf.float32),
        )
        if self._cfg.n_step == 1:
            self.replay.add(transition)
        else:
            # The first n - 1 steps of a run finish no window; after them every step does.
            # (Under XLA a write inside tf.cond copies the whole buffer at every step.)
            tf.cond(valid[0], lambda: self._add(transition), lambda: None)
        self._since_update.assign_add(1)
        self.env_steps.assign_add(self._batch_size)

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
        needed = max(cfg.batch_size, min(cfg.learning_starts, self.replay.capacity))
        tf.cond(self.replay.size() >= needed, self._learn, lambda: None)

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
