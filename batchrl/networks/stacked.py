"""Stacked networks: M parameter vectors at once, the batched-parameters forward pass of an
ES generation or a PPO population."""

from __future__ import annotations

import abc
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import tensorflow as tf

from batchrl.networks.mlp import ACTIVATIONS, MLP


class PopulationNetwork(abc.ABC):
    """A network whose parameters are a flat vector, evaluated for M vectors in one call.

    Evolution strategies perturb the flat parameters theta [D] of a policy; the whole
    population of M perturbed vectors acts in one batched call:

        net = PopulationMLP(observ_size=4, hidden=[64, 64], output_size=2)
        theta = net.init_params(seed=0)                  # [D]
        params = theta + sigma * noise                   # [M, D]
        output = net.apply(params, observ)               # [M, E, ...] -> [M, E, output]

    The network holds no variables; whoever owns theta (a strategy) checkpoints it.
    """

    @property
    @abc.abstractmethod
    def num_params(self) -> int:
        """D, the length of a parameter vector."""

    @abc.abstractmethod
    def init_params(self, seed: int) -> tf.Tensor:
        """Initial parameters float32 [D], reproducible from `seed`."""

    @abc.abstractmethod
    def apply(self, params: tf.Tensor, observ: tf.Tensor) -> tf.Tensor:
        """Outputs [M, E, ...] for parameters [M, D] and observations [M, E, ...] by member."""


class PopulationMLP(PopulationNetwork):
    """An MLP on vector observations: one batched matrix product per layer, no member loop.

    Layout of a parameter vector: for each layer, its weights W [in, out] row-major, then
    its biases b [out]. Layer l computes x <- act(x W_m + b_m) for every member m at once
    with `tf.linalg.matmul` on [M, E, in] x [M, in, out]; the last layer is linear.
    `init_params` draws W orthogonally with gain sqrt(2) (hidden) and `output_gain`
    (output), and zero biases, as `batchrl.networks.MLP` does.
    """

    def __init__(
        self,
        observ_size: int,
        hidden: Sequence[int],
        output_size: int,
        activation: str = "tanh",
        output_gain: float = 0.01,
        features: bool = False,
    ):
        """`features`: `apply` gives the last hidden layer beside the output, [..., D + L],
        as `batchrl.networks.WithFeatures` does (gSDE)."""
        self._features = features
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"Unknown activation {activation!r}; valid choices are {sorted(ACTIVATIONS)}."
            )
        self._activation = ACTIVATIONS[activation]
        self._output_gain = output_gain
        sizes = [int(observ_size), *map(int, hidden), int(output_size)]
        self.shapes = list(zip(sizes[:-1], sizes[1:]))  # (in, out) of each layer
        self._num_params = sum(i * o + o for i, o in self.shapes)

    @property
    def num_params(self) -> int:
        return self._num_params

    def init_params(self, seed: int) -> tf.Tensor:
        parts = []
        for index, (units_in, units_out) in enumerate(self.shapes):
            last = index == len(self.shapes) - 1
            gain = self._output_gain if last else float(np.sqrt(2))
            init = tf.initializers.Orthogonal(gain=gain, seed=int(seed) + index)
            parts += [tf.reshape(init([units_in, units_out]), [-1]), tf.zeros([units_out])]
        return tf.concat(parts, 0)  # [D]

    def flatten(self, mlp: MLP) -> tf.Tensor:
        """The parameters [D] of an `MLP` of the same sizes, in this network's layout.

        `apply` on them computes what `mlp` computes (to float32 rounding: a batched
        product may round differently): a population can start from M such networks.

        Raises:
          ValueError: `mlp` has convolutions, is not built, or its sizes differ.
        """
        mlp = getattr(mlp, "mlp", mlp)  # A `WithFeatures`' MLP.
        layers = [*mlp.hidden, mlp.output]
        shapes = [tuple(layer.w.shape) if layer.w is not None else None for layer in layers]
        if mlp.conv or shapes != self.shapes:
            raise ValueError(
                f"An MLP of layers {shapes} (convolutions {len(mlp.conv)}) is not one of "
                f"{self.shapes}."
            )
        parts = [tf.reshape(p, [-1]) for layer in layers for p in (layer.w, layer.b)]
        return tf.concat(parts, 0)  # [D]

    def apply(self, params: tf.Tensor, observ: tf.Tensor) -> tf.Tensor:
        params = tf.convert_to_tensor(params, tf.float32)  # [M, D]
        x = tf.convert_to_tensor(observ, tf.float32)  # [M, E, O]
        offset = 0
        for index, (units_in, units_out) in enumerate(self.shapes):
            w = params[:, offset : offset + units_in * units_out]
            w = tf.reshape(w, [-1, units_in, units_out])  # [M, in, out]
            offset += units_in * units_out
            b = params[:, offset : offset + units_out]  # [M, out]
            offset += units_out
            hidden = x
            x = tf.linalg.matmul(x, w) + b[:, None, :]  # [M, E, out]
            if index < len(self.shapes) - 1:
                x = self._activation(x)
        return tf.concat([x, hidden], -1) if self._features else x


def action_size(space: gym.Space) -> int:
    """Outputs the network needs for `space`: one logit per choice, or one mean per dimension."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.Box):
        return int(np.prod(space.shape))
    raise ValueError(f"Population policies act in Box or Discrete spaces, not {space}.")


def to_action(output: tf.Tensor, space: gym.Space, squash: bool = False) -> tf.Tensor:
    """Deterministic actions [...] (Discrete) or [..., A] (Box) for network outputs [..., size].

    Discrete: the argmax of the logits, int32. Box: the mean, squashed into [low, high]
    with low + (tanh(mean) + 1) / 2 * (high - low) when `squash`, else clipped to it.
    """
    if isinstance(space, gym.spaces.Discrete):
        return tf.argmax(output, -1, output_type=tf.int32)
    low = tf.constant(np.broadcast_to(space.low, space.shape).reshape(-1), tf.float32)
    high = tf.constant(np.broadcast_to(space.high, space.shape).reshape(-1), tf.float32)
    if squash:
        action = low + (tf.tanh(output) + 1.0) / 2.0 * (high - low)
    else:
        action = tf.clip_by_value(output, low, high)
    return tf.reshape(action, tf.concat([tf.shape(output)[:-1], space.shape], 0))
