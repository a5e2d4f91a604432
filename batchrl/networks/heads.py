"""Policy heads: network outputs to tensorflow-probability action distributions."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

tfd = tfp.distributions


class PolicyHead(tf.Module):
    """Turns network outputs into a tensorflow-probability action distribution.

    Box actions get a diagonal Gaussian with a learned, state-independent log standard
    deviation; the mean is optionally squashed by tanh into [-1, 1] and rescaled to the
    space bounds. Discrete actions get a categorical distribution over logits.
    """

    def __init__(
        self,
        action_space: gym.Space,
        squash_mean: bool = False,
        init_log_std: float = 0.0,
        name: str | None = None,
    ):
        super().__init__(name=name)
        self._discrete = isinstance(action_space, gym.spaces.Discrete)
        if self._discrete:
            self.size = int(action_space.n)
            self._start = int(action_space.start)
            return
        if not isinstance(action_space, gym.spaces.Box):
            raise ValueError(
                f"Unsupported action space {action_space!r}; valid choices are "
                "gymnasium.spaces.Box and gymnasium.spaces.Discrete."
            )
        self.size = int(np.prod(action_space.shape))
        self._squash = squash_mean
        if squash_mean and not action_space.is_bounded():
            raise ValueError(f"squash_mean needs a bounded action space, got {action_space}.")
        low = np.where(np.isfinite(action_space.low), action_space.low, -1.0)
        high = np.where(np.isfinite(action_space.high), action_space.high, 1.0)
        self._center = tf.constant((high + low) / 2, tf.float32)
        self._scale = tf.constant((high - low) / 2, tf.float32)
        self._low = tf.constant(action_space.low, tf.float32)  # May hold -inf.
        self._high = tf.constant(action_space.high, tf.float32)  # May hold inf.
        self.log_std = tf.Variable(tf.fill([self.size], float(init_log_std)), name="log_std")

    def __call__(self, output, log_std=None):
        """Returns the distribution for network `output` [N, size].

        Args:
          output: the policy network's output [N, size].
          log_std: the log standard deviation [size] to use instead of the current one,
            e.g. a copy taken before an update, to rebuild the behaviour policy.
        """
        if self._discrete:
            return tfd.Categorical(logits=output)
        mean = output
        if self._squash:
            mean = self._center + self._scale * tf.tanh(mean)
        log_std = self.log_std if log_std is None else log_std
        scale = tf.exp(log_std) * tf.ones_like(mean)
        # The same distribution as MultivariateNormalDiag (log_prob, entropy, KL and mode
        # agree to rounding; the samples of a seed differ), without its linear operator and
        # bijector: 335 fewer ops in PPO's training call, about 15% less time to trace it.
        return tfd.Independent(tfd.Normal(mean, scale), reinterpreted_batch_ndims=1)

    def to_env_action(self, sample):
        """Converts a distribution sample [N, ...] into the action the environment takes."""
        if self._discrete:
            return tf.cast(sample, tf.int32) + self._start
        return tf.clip_by_value(sample, self._low, self._high)

    def sample_spec(self) -> tuple[tuple[int, ...], tf.DType]:
        """The shape and dtype of one sample of the distribution."""
        return ((), tf.int32) if self._discrete else ((self.size,), tf.float32)
