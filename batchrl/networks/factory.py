"""Builds the networks a config's `network` section describes."""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from batchrl.networks.mlp import MLP
from batchrl.networks.recurrent import RecurrentNetwork
from batchrl.tools.registry import NETWORKS


def make_feedforward(network, layers: Sequence[int], output: int, output_gain: float, name: str):
    """An `MLP` (after `network.conv_filters` convolutions, if any)."""
    return MLP(layers, output, network.activation, output_gain, name, network.conv_filters)


def make_recurrent(network, layers: Sequence[int], output: int, output_gain: float, name: str):
    """A `RecurrentNetwork`: a `network.name` cell ('gru' or 'lstm'), then an MLP."""
    return RecurrentNetwork(
        network.name, network.recurrent_units, layers, output, network.activation, output_gain, name
    )


def make_network(
    network, layers: Sequence[int], output: int, output_gain: float = 1.0, name: str = "network"
) -> tf.Module:
    """The network `network.name` names, from the registry or an entry point.

    Args:
      network: the `network` section of a config (`name`, `activation`, `conv_filters`,
        `recurrent_units`, ...).
      layers: hidden layer sizes, e.g. `network.policy_layers`.
      output: the size of the output layer.
      output_gain: gain of the output layer's orthogonal initialization.
      name: the module's name.

    Returns:
      A `tf.Module` called on observations [N, ...]; a recurrent one has `state_size`,
      `initial_state(N)`, `__call__(observ, state)` and `unroll(observ, first, state)`.

    Raises:
      ConfigError: `network.name` names no network.
    """
    return NETWORKS.resolve(network.name)(network, layers, output, output_gain, name)


def is_recurrent(network) -> bool:
    """Whether `network.name` names a recurrent network (one with a state)."""
    return network.name in ("gru", "lstm")
