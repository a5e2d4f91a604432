"""PPO's networks: the policy head, the policy network and the value network."""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from batchrl.networks import (
    MLP,
    PolicyHead,
    StateDependentNoiseHead,
    WithFeatures,
    is_recurrent,
    make_network,
)


def make_networks(
    network, batch_env, topologies: Sequence[str] = (), gsde: bool = False
) -> tuple[PolicyHead, tf.Module, tf.Module]:
    """PPO's policy head, policy network and value network, their variables created.

    The weight initializers draw from the global seed (`tf.keras.utils.set_random_seed`),
    in this order: the policy's layers, then the value's.

    Args:
      network: the `network` section of a config.
      batch_env: the environments, for their observation and action spaces.
      topologies: `env.topologies`, a mixed batch's, which graph networks read.
      gsde: a policy with gSDE's head (`StateDependentNoiseHead`), whose network's output
        is the mean and its last hidden layer (a feedforward network).
    """
    space = batch_env.action_space
    if gsde:
        head = StateDependentNoiseHead(
            space, network.policy_layers[-1], network.squash_mean, network.init_log_std
        )
        policy = WithFeatures(
            make_network(network, network.policy_layers, head.action_size, 0.01, "policy")
        )
    else:
        head = PolicyHead(space, network.squash_mean, network.init_log_std)
        policy = make_network(
            network, network.policy_layers, head.size, 0.01, "policy", topologies=topologies
        )
    if is_recurrent(network):
        value = MLP(network.value_layers, 1, network.activation, 1.0, "value")
    else:  # An MLP for feedforward; the critic graph network for graph.
        value = make_network(network, network.value_layers, 1, 1.0, "value", topologies=topologies)
    dummy = tf.zeros((1,) + tuple(batch_env.observation_space.shape))
    if is_recurrent(network):
        policy(dummy, policy.initial_state(1))
    else:
        policy(dummy)
    value(dummy)
    return head, policy, value
