"""Dense and convolutional layers and the MLP; variables are created on the first call."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

ACTIVATIONS = {"tanh": tf.tanh, "relu": tf.nn.relu, "elu": tf.nn.elu}
INITS = ("orthogonal", "uniform")  # How a layer's weights and biases start (`initial`).


def check_init(init: str) -> None:
    """Raises ValueError, naming the valid choices, for an `init` not in `INITS`."""
    if init not in INITS:
        raise ValueError(f"Unknown init {init!r}; valid choices are {list(INITS)}.")


def initial(shape: list[int], fan_in: int, gain: float, init: str) -> tuple[tf.Tensor, tf.Tensor]:
    """A layer's first weights [*shape] and biases [shape[-1]].

        orthogonal: W orthogonal, scaled by `gain`; b = 0 (the PPO and IMPALA networks).
        uniform:    W and b drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), `gain` unused:
                    PyTorch's default for nn.Linear and nn.Conv2d, which Stable-Baselines3's,
                    CleanRL's and the MinAtar baselines' Q networks start from. DQN's Q
                    networks use it: started orthogonal (gain sqrt(2), zero biases), Q
                    diverged far past 1 / (1 - gamma) on CartPole with a target copied
                    every 63 updates where this start stayed bounded (DQN's README).

    `fan_in` is the inputs of one output unit: the input features of a dense layer,
    kernel * kernel * channels of a convolution.
    """
    check_init(init)
    if init == "orthogonal":
        return tf.initializers.Orthogonal(gain=gain)(shape), tf.zeros(shape[-1:])
    bound = 1.0 / np.sqrt(fan_in)
    weights = tf.random.uniform(shape, -bound, bound)
    return weights, tf.random.uniform(shape[-1:], -bound, bound)


def as_float(x) -> tf.Tensor:
    """Observations as float32: uint8 frames scaled to [0, 1] (x / 255), others cast.

    Frames stay uint8 up to the network; this is where they become floats.
    """
    x = tf.convert_to_tensor(x)
    if x.dtype == tf.uint8:
        return tf.cast(x, tf.float32) / 255.0
    return x if x.dtype.is_floating else tf.cast(x, tf.float32)


class Linear(tf.Module):
    """y = x W + b, W orthogonal scaled by `gain` and b zero at first (or `init` uniform)."""

    def __init__(
        self, units: int, gain: float = 1.0, name: str | None = None, init: str = "orthogonal"
    ):
        super().__init__(name=name)
        self._units = units
        self._gain = gain
        self._init = init
        self.w = None
        self.b = None

    @tf.Module.with_name_scope
    def __call__(self, x):
        if self.w is None:
            fan_in = x.shape[-1]
            w, b = initial([fan_in, self._units], fan_in, self._gain, self._init)
            self.w = tf.Variable(w, name="w")
            self.b = tf.Variable(b, name="b")
        return tf.matmul(x, self.w) + self.b


class Conv2D(tf.Module):
    """A square convolution, orthogonal (or `init` uniform): [N, H, W, C] -> [N, H', W', F].

    By default 3x3, stride 1, no padding ([N, H-2, W-2, F]), as the MinAtar ConvNet; the
    Atari torsos (`batchrl.networks.convnets`) set the kernel, stride and padding.
    """

    def __init__(
        self,
        filters: int,
        gain: float = 1.0,
        name: str | None = None,
        *,
        kernel: int = 3,
        stride: int = 1,
        padding: str = "VALID",
        init: str = "orthogonal",
    ):
        super().__init__(name=name)
        self._filters, self._kernel, self._stride, self._padding = filters, kernel, stride, padding
        self._gain = gain
        self._init = init
        self.w = None
        self.b = None

    @tf.Module.with_name_scope
    def __call__(self, x):
        if self.w is None:
            shape = [self._kernel, self._kernel, x.shape[-1], self._filters]
            w, b = initial(shape, self._kernel * self._kernel * x.shape[-1], self._gain, self._init)
            self.w = tf.Variable(w, name="w")
            self.b = tf.Variable(b, name="b")
        return tf.nn.conv2d(x, self.w, strides=self._stride, padding=self._padding) + self.b


class MLP(tf.Module):
    """Optional 3x3 convolutions, then hidden layers with an activation, then a linear output.

    Inputs are [N, O] vectors, or [N, H, W, C] images when `conv_filters` is given (for
    MinAtar, whose baseline network is one such layer of 16 filters before 128 units).
    Anything after the convolutions is flattened before the dense layers. A `torso`
    module (the Atari ConvNets of `batchrl.networks.convnets`) may stand in for the
    convolutions. uint8 inputs (frames) are scaled to [0, 1] first (`as_float`). With
    `output` None there is no output layer: the result is the last hidden layer's
    activations (the features a recurrent core reads). Layers start orthogonal (gain
    sqrt(2) for the convolutions and hidden layers, `output_gain` for the output), or
    with `init` "uniform" as PyTorch's do (`initial`).
    """

    def __init__(
        self,
        hidden: Sequence[int],
        output: int | None,
        activation: str = "tanh",
        output_gain: float = 1.0,
        name: str | None = None,
        conv_filters: Sequence[int] = (),
        torso: tf.Module | None = None,
        init: str = "orthogonal",
    ):
        super().__init__(name=name)
        if torso is not None and conv_filters:
            raise ValueError(f"Give conv_filters {list(conv_filters)} or a torso, not both.")
        self.torso = torso
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"Unknown activation {activation!r}; valid choices are {sorted(ACTIVATIONS)}."
            )
        self._activation = ACTIVATIONS[activation]
        check_init(init)  # At construction: layers are built on the first call.
        gain = np.sqrt(2)  # Of the hidden layers, when orthogonal.
        self.conv = [Conv2D(filters, gain=gain, init=init) for filters in conv_filters]
        self.hidden = [Linear(units, gain=gain, init=init) for units in hidden]
        self.output = None if output is None else Linear(output, gain=output_gain, init=init)

    @tf.Module.with_name_scope
    def __call__(self, x):
        x = self.features(x)
        return x if self.output is None else self.output(x)

    def features(self, x):
        """The last hidden layer's activations [N, L] (the input, flattened, if none)."""
        x = as_float(x)
        if self.torso is not None:
            x = self.torso(x)  # [N, features]
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
        return x


class WithFeatures(tf.Module):
    """An `MLP` whose output is its output layer's beside its last hidden layer's,
    [N, D + L], for a head that reads the policy's features too (gSDE's
    `StateDependentNoiseHead`)."""

    def __init__(self, mlp: MLP, name: str | None = None):
        super().__init__(name=name)
        if mlp.output is None or not mlp.hidden:
            raise ValueError("WithFeatures needs an MLP with hidden layers and an output layer.")
        self.mlp = mlp

    def __call__(self, x):
        features = self.mlp.features(x)  # [N, L]
        return tf.concat([self.mlp.output(features), features], axis=-1)  # [N, D + L]


class SharedBodyNetwork(tf.Module):
    """A body shared by a policy output and a baseline, without a core: TorchBeast's
    feed-forward `AtariNet` (Küttler et al. 2019, https://arxiv.org/abs/1910.03552):

        f = body(x)               the Atari torso and/or conv_filters  [N, F]
        output = policy(f)        dense layers, then linear to D       [N, D]
        V(x) = baseline(f)        dense layers, then linear to 1       [N]

    Called, it gives the policy output alone, which is all an actor needs; `with_value`
    gives both from one pass through the body, as the learner wants them.
    """

    def __init__(self, body: MLP, policy: MLP, baseline: MLP, name: str | None = None):
        super().__init__(name=name)
        self.body = body
        self.policy = policy
        self.baseline = baseline

    def __call__(self, x):
        return self.policy(self.body(x))

    def with_value(self, x):
        """Policy outputs [N, D] and values [N] for inputs [N, ...]."""
        features = self.body(x)
        return self.policy(features), self.baseline(features)[:, 0]


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
