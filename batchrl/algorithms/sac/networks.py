"""SAC's and TD3's networks: the tanh-squashed Gaussian actor, the deterministic actor, and a
pair of critics."""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import tensorflow as tf

from batchrl.algorithms.sac import squashed_gaussian
from batchrl.networks import MLP, as_float

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0  # The log std is clipped to these (SB3's).
OUTPUT_GAIN = 0.01  # Initial means and log stds near 0: tanh(N(0, 1)) actions.


class BoundedActor(tf.Module):
    """An actor whose actions live in [-1, 1] per dimension, mapped to a Box's bounds.

    `to_env` and `from_env` map actions [N, A] in [-1, 1] to and from the space's bounds
    [N, ...]; `uniform` draws environment actions uniformly in the bounds (the warm-up).
    """

    def __init__(self, space: gym.spaces.Box, name: str):
        super().__init__(name=name)
        self.size = int(np.prod(space.shape))
        self._shape = tuple(space.shape)
        self._low = tf.constant(np.reshape(space.low, [-1]), tf.float32)  # [A]
        self._high = tf.constant(np.reshape(space.high, [-1]), tf.float32)  # [A]

    def uniform(self, draw) -> tf.Tensor:
        """Environment actions uniform in the bounds [N, ...], from uniforms [N, A] in [0, 1)."""
        return tf.reshape(self._low + draw * (self._high - self._low), (-1,) + self._shape)

    def to_env(self, squashed) -> tf.Tensor:
        """Environment actions [N, ...] for actions in [-1, 1] [N, A]."""
        action = squashed_gaussian.to_bounds(squashed, self._low, self._high)  # [N, A]
        return tf.reshape(action, (-1,) + self._shape)

    def from_env(self, action) -> tf.Tensor:
        """Actions in [-1, 1] [N, A] for environment actions [N, ...]."""
        action = tf.reshape(tf.cast(action, tf.float32), [-1, self.size])  # [N, A]
        return squashed_gaussian.from_bounds(action, self._low, self._high)


class SquashedGaussianActor(BoundedActor):
    """The policy a = tanh(u), u ~ N(mean(s), exp(log_std(s))^2), in [-1, 1] per dimension.

    An MLP of observations [N, O] outputs the mean and log std [N, 2A] (the log std
    clipped to [-20, 2]).
    """

    def __init__(
        self, layers: Sequence[int], activation: str, space: gym.spaces.Box, name: str = "actor"
    ):
        super().__init__(space, name)
        with self.name_scope:
            self.mlp = MLP(layers, 2 * self.size, activation, OUTPUT_GAIN, "mlp")

    def gaussian(self, observ) -> tuple[tf.Tensor, tf.Tensor]:
        """The mean [N, A] and clipped log std [N, A] for observations [N, ...]."""
        output = self.mlp(flat(observ))  # [N, 2A]
        mean, log_std = output[:, : self.size], output[:, self.size :]
        return mean, tf.clip_by_value(log_std, LOG_STD_MIN, LOG_STD_MAX)

    def sample(self, observ, noise) -> tuple[tf.Tensor, tf.Tensor]:
        """Reparameterized actions tanh(mean + std * noise) [N, A] and their log pi [N], for
        observations [N, ...] and standard normal noise [N, A]."""
        mean, log_std = self.gaussian(observ)
        u = mean + tf.exp(log_std) * noise  # [N, A]
        return tf.tanh(u), squashed_gaussian.squashed_gaussian_log_prob(u, mean, log_std)

    def mode(self, observ) -> tf.Tensor:
        """The squashed mean tanh(mean) [N, A]."""
        return tf.tanh(self.gaussian(observ)[0])


class DeterministicActor(BoundedActor):
    """TD3's policy a = tanh(MLP(s)) [N, A], in [-1, 1] per dimension."""

    def __init__(
        self, layers: Sequence[int], activation: str, space: gym.spaces.Box, name: str = "actor"
    ):
        super().__init__(space, name)
        with self.name_scope:
            self.mlp = MLP(layers, self.size, activation, OUTPUT_GAIN, "mlp")

    def __call__(self, observ) -> tf.Tensor:
        """Actions [N, A] in [-1, 1] for observations [N, ...]."""
        return tf.tanh(self.mlp(flat(observ)))


class TwinCritic(tf.Module):
    """Two Q networks, each an MLP of concat(observ, action) [N, O + A] to Q [N]."""

    def __init__(self, layers: Sequence[int], activation: str, name: str = "critic"):
        super().__init__(name=name)
        with self.name_scope:
            self.q1 = MLP(layers, 1, activation, 1.0, "q1")
            self.q2 = MLP(layers, 1, activation, 1.0, "q2")

    def __call__(self, observ, action) -> tuple[tf.Tensor, tf.Tensor]:
        """Q1 and Q2 [N] of observations [N, ...] and actions in [-1, 1] [N, A]."""
        inputs = tf.concat([flat(observ), action], axis=1)  # [N, O + A]
        return self.q1(inputs)[:, 0], self.q2(inputs)[:, 0]


def flat(observ) -> tf.Tensor:
    """Observations [N, ...] as float32 vectors [N, O]; uint8 frames scaled to [0, 1]."""
    observ = as_float(observ)
    return tf.reshape(observ, [-1, int(np.prod(observ.shape[1:]))])
