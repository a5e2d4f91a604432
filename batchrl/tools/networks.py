"""Small networks as `tf.Module`s whose variables are created on the first call."""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

tfd = tfp.distributions

ACTIVATIONS = {"tanh": tf.tanh, "relu": tf.nn.relu, "elu": tf.nn.elu}


class Linear(tf.Module):
    """y = x W + b with an orthogonal initialization of W scaled by `gain`."""

    def __init__(self, units: int, gain: float = 1.0, name: str | None = None):
        super().__init__(name=name)
        self._units = units
        self._gain = gain
        self.w = None
        self.b = None

    @tf.Module.with_name_scope
    def __call__(self, x):
        if self.w is None:
            init = tf.initializers.Orthogonal(gain=self._gain)
            self.w = tf.Variable(init([x.shape[-1], self._units]), name="w")
            self.b = tf.Variable(tf.zeros([self._units]), name="b")
        return tf.matmul(x, self.w) + self.b


class Conv2D(tf.Module):
    """A 3x3 convolution with stride 1 and no padding: [N, H, W, C] -> [N, H-2, W-2, F]."""

    def __init__(self, filters: int, gain: float = 1.0, name: str | None = None):
        super().__init__(name=name)
        self._filters = filters
        self._gain = gain
        self.w = None
        self.b = None

    @tf.Module.with_name_scope
    def __call__(self, x):
        if self.w is None:
            init = tf.initializers.Orthogonal(gain=self._gain)
            self.w = tf.Variable(init([3, 3, x.shape[-1], self._filters]), name="w")
            self.b = tf.Variable(tf.zeros([self._filters]), name="b")
        return tf.nn.conv2d(x, self.w, strides=1, padding="VALID") + self.b


class MLP(tf.Module):
    """Optional 3x3 convolutions, then hidden layers with an activation, then a linear output.

    Inputs are [N, O] vectors, or [N, H, W, C] images when `conv_filters` is given (for
    MinAtar, whose baseline network is one such layer of 16 filters before 128 units).
    Anything after the convolutions is flattened before the dense layers.
    """

    def __init__(
        self,
        hidden: Sequence[int],
        output: int,
        activation: str = "tanh",
        output_gain: float = 1.0,
        name: str | None = None,
        conv_filters: Sequence[int] = (),
    ):
        super().__init__(name=name)
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"Unknown activation {activation!r}; valid choices are {sorted(ACTIVATIONS)}."
            )
        self._activation = ACTIVATIONS[activation]
        self.conv = [Conv2D(filters, gain=np.sqrt(2)) for filters in conv_filters]
        self.hidden = [Linear(units, gain=np.sqrt(2)) for units in hidden]
        self.output = Linear(output, gain=output_gain)

    @tf.Module.with_name_scope
    def __call__(self, x):
        x = tf.convert_to_tensor(x)
        if self.conv and x.shape.rank != 4:
            raise ValueError(
                f"Convolutions need image observations [N, H, W, C], got shape {x.shape}."
            )
        for layer in self.conv:
            x = tf.nn.relu(layer(x))
        if x.shape.rank > 2:
            x = tf.reshape(x, [-1, int(np.prod(x.shape[1:]))])  # [N, H * W * C]
        for layer in self.hidden:
            x = self._activation(layer(x))
        return self.output(x)


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
        return tfd.MultivariateNormalDiag(mean, scale)

    def to_env_action(self, sample):
        """Converts a distribution sample [N, ...] into the action the environment takes."""
        if self._discrete:
            return tf.cast(sample, tf.int32) + self._start
        return tf.clip_by_value(sample, self._low, self._high)

    def sample_spec(self) -> tuple[tuple[int, ...], tf.DType]:
        """The shape and dtype of one sample of the distribution."""
        return ((), tf.int32) if self._discrete else ((self.size,), tf.float32)


def batch_apply(fn, x: tf.Tensor, inner_rank: int = 1) -> tf.Tensor:
    """Applies `fn`, which takes a batch [N, *inner], to `x` [*outer, *inner].

    The outer axes are flattened into one for the call and restored after it, so that a
    network built for [N, O] observations runs on time-major [T, B, O] ones.

    Args:
      fn: a callable from [N, *inner] to [N, *result], e.g. an `MLP`.
      x: a tensor whose last `inner_rank` axes, of static size, are the inner ones.
      inner_rank: how many trailing axes `fn` sees per element.

    Returns:
      The result [*outer, *result].
    """
    x = tf.convert_to_tensor(x)
    split = x.shape.rank - inner_rank
    result = fn(tf.reshape(x, [-1] + x.shape[split:].as_list()))  # [N, *result]
    return tf.reshape(result, tf.concat([tf.shape(x)[:split], tf.shape(result)[1:]], 0))
