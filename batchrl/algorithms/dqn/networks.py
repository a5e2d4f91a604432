"""DQN's Q networks: the plain MLP, or separate value and advantage streams (dueling)."""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from batchrl.networks import MLP

# How Q networks start: PyTorch's default layers, as Stable-Baselines3's, CleanRL's and the
# MinAtar baselines' Q networks (`batchrl.networks.mlp.initial`). Started orthogonal, as
# the actor-critics' are, Q diverged on CartPole where these stayed bounded (README.md).
INIT = "uniform"


class DuelingQNetwork(tf.Module):
    """Q values from a value stream and an advantage stream over a shared torso.

    The dueling architecture of Wang et al. 2016 (https://arxiv.org/abs/1511.06581,
    Figure 1 and section 4.2: the convolutions of DQN shared, then two streams of fully
    connected layers, 512 units each on Atari):

        f = torso(x)              the convolutions (`conv_filters`), flattened;
                                  x itself, flattened, without them         [N, F]
        V(x) = value(f)           hidden layers of its own, then linear to 1 [N]
        A(x, .) = advantage(f)    hidden layers of its own, then linear to A [N, A]
        Q(x, a) = V(x) + A(x, a) - mean_a' A(x, a')     (`dueling`, eq. 9)

    Each stream has the hidden layers `hidden`, so that a dueling network is as deep as
    the plain one. Without convolutions nothing is shared: a value and an advantage MLP
    side by side, as RLlib's `dueling` with `fcnet_hiddens` empty and its own `hiddens`
    per stream. uint8 inputs (frames) are scaled to [0, 1] (`batchrl.networks.as_float`).
    """

    def __init__(
        self,
        hidden: Sequence[int],
        num_actions: int,
        activation: str = "relu",
        conv_filters: Sequence[int] = (),
        name: str | None = None,
    ):
        """Creates the torso and the two streams; variables are built on the first call.

        Args:
          hidden: the units of each stream's hidden layers.
          num_actions: A, the advantage stream's outputs.
          activation: of the hidden layers (a name of `batchrl.networks.ACTIVATIONS`).
          conv_filters: the filters of the shared 3x3 convolutions; none for vectors.
          name: name of the module.
        """
        super().__init__(name=name)
        with self.name_scope:
            self.torso = MLP(
                (), None, activation, conv_filters=conv_filters, name="torso", init=INIT
            )
            self.value = MLP(hidden, 1, activation, 1.0, "value", init=INIT)
            self.advantage = MLP(hidden, num_actions, activation, 1.0, "advantage", init=INIT)

    def __call__(self, x) -> tf.Tensor:
        """Q values [N, A] of observations [N, ...]."""
        value, advantage = self.streams(x)
        return dueling(value, advantage)

    def streams(self, x) -> tuple[tf.Tensor, tf.Tensor]:
        """The value [N] and the advantages [N, A] of observations [N, ...]."""
        features = self.torso(x)  # [N, F]
        return self.value(features)[:, 0], self.advantage(features)


def make_q_network(
    hidden: Sequence[int],
    num_actions: int,
    activation: str,
    conv_filters: Sequence[int],
    dueling: bool,
    name: str,
) -> tf.Module:
    """A Q network [N, ...] -> [N, A]: a `DuelingQNetwork`, or an `MLP` of one stream."""
    if dueling:
        return DuelingQNetwork(hidden, num_actions, activation, conv_filters, name)
    return MLP(hidden, num_actions, activation, 1.0, name, conv_filters=conv_filters, init=INIT)


def dueling(value: tf.Tensor, advantage: tf.Tensor) -> tf.Tensor:
    """Q values from a value and advantages (Wang et al. 2016, eq. 9).

        Q(s, a) = V(s) + A(s, a) - mean_a' A(s, a')

    Args:
      value: [N, 1] or [N] state values.
      advantage: [N, A] advantages.

    Returns:
      [N, A] Q values.
    """
    value = tf.reshape(value, [-1, 1])  # [N, 1]
    return value + advantage - tf.reduce_mean(advantage, axis=1, keepdims=True)
