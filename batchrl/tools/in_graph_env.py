"""The interface of a batch of environments that steps inside the TensorFlow graph."""

from __future__ import annotations

import abc

import gymnasium as gym
import tensorflow as tf


def observ_dtype(space: gym.Space) -> tf.DType:
    """The in-graph dtype of observations: uint8 for frames (a Box of uint8), else float32.

    Frames stay bytes through the batch, the unrolls and the replay, at a quarter of the
    memory and copies of float32; the networks cast them (`batchrl.networks.as_float`).
    """
    return tf.uint8 if getattr(space, "dtype", None) == "uint8" else tf.float32


def action_dtype(space: gym.Space) -> tf.DType:
    """The in-graph dtype of actions: int32 for Discrete spaces, float32 for Box spaces."""
    if isinstance(space, gym.spaces.Discrete):
        return tf.int32
    if isinstance(space, gym.spaces.Box):
        return tf.float32
    raise ValueError(
        f"Unsupported action space {space!r}; valid choices are gymnasium.spaces.Box "
        "and gymnasium.spaces.Discrete."
    )


class InGraphEnv(tf.Module, abc.ABC):
    """A batch of B environments whose step and reset are TensorFlow operations.

    The current batch lives in variables that algorithms and `simulate` read:

        observ      [B, *observation_space.shape]  float32, or uint8 for frames (observ_dtype)
        action      [B, *action_space.shape]       float32 (Box) or int32 (Discrete)
        reward      [B]                            float32
        terminated  [B]                            bool, the episode reached a terminal state
        truncated   [B]                            bool, the episode was cut (e.g. a time limit)
        done        [B]                            bool, terminated or truncated, or never reset
        episode_return  [B]                        float32, sum of rewards since the last reset
        episode_length  [B]                        int32, steps since the last reset

    `done` starts true, so the first `simulate` step resets every environment.
    `observ` after `step` is the true next observation, also for the step that ends an
    episode; environments are reset only when `reset` is called, which lets algorithms
    bootstrap from the final observation of a truncated episode.

    Subclasses implement `_step` and `_reset` with TensorFlow ops (or a callback, as
    `InGraphBatchEnv` does); the base class keeps the variables up to date. Both run inside
    `tf.function`; an environment written in pure TensorFlow ops also compiles with XLA.
    """

    # Whether `_step` and `_reset` need autograph (Python `if` on tensors); see
    # `batchrl.core.Algorithm.autograph`.
    autograph: bool = True
    # Whether the subclass implements `_reset_where`, a reset by mask over the whole
    # batch, which `reset_where` then uses (see there).
    resets_by_mask: bool = False

    def __init__(
        self,
        batch_size: int,
        observation_space: gym.Space,
        action_space: gym.Space,
        name: str | None = None,
    ):
        super().__init__(name=name)
        if not isinstance(observation_space, gym.spaces.Box):
            raise ValueError(
                f"Unsupported observation space {observation_space!r}; valid choices are "
                "gymnasium.spaces.Box."
            )
        self.observation_space = observation_space
        self.action_space = action_space
        self._batch_size = int(batch_size)
        observ_shape = (self._batch_size,) + tuple(observation_space.shape)
        action_shape = (self._batch_size,) + tuple(action_space.shape)
        self.observ_dtype = observ_dtype(observation_space)
        self.observ = tf.Variable(tf.zeros(observ_shape, self.observ_dtype), trainable=False)
        self.action = tf.Variable(
            tf.zeros(action_shape, action_dtype(action_space)), trainable=False
        )
        self.reward = tf.Variable(tf.zeros([self._batch_size], tf.float32), trainable=False)
        self.terminated = tf.Variable(tf.zeros([self._batch_size], tf.bool), trainable=False)
        self.truncated = tf.Variable(tf.zeros([self._batch_size], tf.bool), trainable=False)
        self.done = tf.Variable(tf.ones([self._batch_size], tf.bool), trainable=False)
        self.episode_return = tf.Variable(tf.zeros([self._batch_size]), trainable=False)
        self.episode_length = tf.Variable(tf.zeros([self._batch_size], tf.int32), trainable=False)

    def __len__(self) -> int:
        return self._batch_size

    def close(self) -> None:
        """Releases what the environment holds outside the graph; nothing by default."""

    def step(self, action: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        """Steps all environments of the batch.

        Args:
          action: Tensor [B, *action_space.shape].

        Returns:
          observ [B, ...] (`observ_dtype`), reward [B] float32, terminated [B] bool,
          truncated [B] bool.
        """
        action = tf.convert_to_tensor(action, self.action.dtype)
        observ, reward, terminated, truncated = self._step(action)
        self.action.assign(action)
        self.observ.assign(observ)
        self.reward.assign(reward)
        self.terminated.assign(terminated)
        self.truncated.assign(truncated)
        self.done.assign(tf.logical_or(terminated, truncated))
        self.episode_return.assign_add(reward)
        self.episode_length.assign_add(tf.ones_like(self.episode_length))
        return observ, reward, terminated, truncated

    def reset(self, indices: tf.Tensor | None = None) -> tf.Tensor:
        """Resets the environments at `indices` (all when None).

        Args:
          indices: int32 Tensor [K] of batch indices.

        Returns:
          observ [K, ...] (`observ_dtype`), the first observations of the new episodes.
        """
        if indices is None:
            indices = tf.range(self._batch_size)
        indices = tf.convert_to_tensor(indices, tf.int32)
        observ = self._reset(indices)
        rows = indices[:, None]
        self.observ.scatter_nd_update(rows, observ)
        zeros = tf.zeros_like(indices, tf.float32)
        falses = tf.zeros_like(indices, tf.bool)
        self.reward.scatter_nd_update(rows, zeros)
        self.terminated.scatter_nd_update(rows, falses)
        self.truncated.scatter_nd_update(rows, falses)
        self.done.scatter_nd_update(rows, falses)
        self.episode_return.scatter_nd_update(rows, zeros)
        self.episode_length.scatter_nd_update(rows, tf.zeros_like(indices))
        return observ

    def reset_where(self, mask: tf.Tensor) -> None:
        """Resets the environments where `mask` is true, as `reset` of their indices does.

        `simulate` resets this way. An environment that implements `_reset_where` (and
        sets `resets_by_mask`) starts the new episodes with selects over the whole batch,
        and the batch variables are updated the same way, without gathers and scatters by
        a dynamic number of indices; under XLA that made the routing twin's `simulate`
        1.2x to 1.6x faster (docs/lab-log.md, 2026-11-27). The others reset by indices:
        the classic-control ports draw each new episode's noise by its index, and by mask
        CartPole-v1 lost up to a fifth of its steps per second.

        Args:
          mask: bool Tensor [B], the environments to reset.
        """
        mask = tf.convert_to_tensor(mask, tf.bool)
        if not self.resets_by_mask:
            self.reset(mask_indices(mask))
            return
        observ = self._reset_where(mask)  # [B, ...]
        rows = tf.reshape(mask, [-1] + [1] * (len(self.observ.shape) - 1))  # [B, 1, ...]
        self.observ.assign(tf.where(rows, observ, self.observ))
        for variable in (self.reward, self.terminated, self.truncated, self.done):
            variable.assign(tf.where(mask, tf.zeros_like(variable), variable))
        self.episode_return.assign(tf.where(mask, 0.0, self.episode_return))
        self.episode_length.assign(tf.where(mask, 0, self.episode_length))

    @abc.abstractmethod
    def _step(self, action: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        """Returns observ [B, ...] float32, reward [B] float32, terminated [B], truncated [B]."""

    @abc.abstractmethod
    def _reset(self, indices: tf.Tensor) -> tf.Tensor:
        """Resets the environments at int32 `indices` [K]; returns observ [K, ...] float32."""

    def _reset_where(self, mask: tf.Tensor) -> tf.Tensor:
        """Resets the environments where `mask` [B] is true; returns observ [B, ...] with
        their first observations (the other rows are not read). Optional: see
        `resets_by_mask`."""
        raise NotImplementedError(f"{type(self).__name__} does not reset by mask.")


def mask_indices(mask: tf.Tensor) -> tf.Tensor:
    """The int32 indices [K] where the bool vector `mask` [B] is true.

    For a batch of one, the answer is [0] whenever it is not empty (callers such as
    `simulate` ask only then), and a static shape spares XLA's dynamic padder, which fails
    on stacks of vectors whose dynamic length is at most 1.
    """
    if mask.shape[0] == 1:
        return tf.zeros([1], tf.int32)
    return tf.cast(tf.where(mask)[:, 0], tf.int32)
