"""Builds the networks a config's `network` section describes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import tensorflow as tf

from batchrl.config import ConfigError, check_choice, require
from batchrl.config.registry import GRAPH_FEATURES, NETWORKS
from batchrl.config.section import Section
from batchrl.networks.convnets import TORSOS
from batchrl.networks.mlp import ACTIVATIONS, MLP, SharedBodyNetwork
from batchrl.networks.recurrent import CELLS, CoreNetwork, RecurrentNetwork
from batchrl.networks.stacked import PopulationMLP, PopulationNetwork

CORES = ("none", *sorted(CELLS))
CORE_INPUTS = ("last_action", "last_reward")  # What `network.core_inputs` may list.
# The networks whose parameters `train.population` > 1 stacks as [M] members.
MEMBER_NETWORKS = ("feedforward", "gru", "lstm")


def make_torso(network) -> tf.Module | None:
    """The image torso `network.torso` names: 'shallow' (Nature ConvNet), 'deep' (IMPALA's
    ResNet), or None for 'none' (the dense layers read the input, after any
    `network.conv_filters` convolutions)."""
    torso = network.get("torso", "none")
    if torso == "none":
        return None
    if torso not in TORSOS:
        raise ConfigError(
            f"Unknown network.torso={torso!r}; valid choices are {['none', *sorted(TORSOS)]}."
        )
    return TORSOS[torso]()


def make_core_network(
    network, output: int, name: str = "agent", num_actions: int | None = None
) -> CoreNetwork | None:
    """TorchBeast's agent network when `network.core` names a cell ('lstm' or 'gru'), else
    None: `network.torso` (or `network.conv_filters`) and the dense `network.policy_layers`
    as a body shared by the policy and the baseline, a core of `network.core_size` units,
    then a linear policy output of size `output` and a linear baseline. With
    `network.core_inputs: [last_action]` the core also reads the one-hot last action of
    `num_actions` (the number of discrete actions; None for continuous ones), and with
    `last_reward` the last reward.

    Raises:
      ConfigError: an unknown core, or last-action inputs without discrete actions.
    """
    core = network.get("core", "none")
    if core == "none":
        return None
    if core not in CELLS:
        raise ConfigError(f"Unknown network.core={core!r}; valid choices are {list(CORES)}.")
    inputs = list(network.get("core_inputs", []))
    if "last_action" in inputs and not num_actions:
        raise ConfigError(
            f"network.core_inputs={inputs}: the last action is read one-hot, which needs "
            "discrete actions (a gymnasium.spaces.Discrete action space)."
        )
    body = MLP(
        network.policy_layers,
        None,
        network.activation,
        name="body",
        conv_filters=network.conv_filters,
        torso=make_torso(network),
    )
    last_actions = num_actions if "last_action" in inputs else 0
    last_reward = "last_reward" in inputs
    return CoreNetwork(body, core, network.core_size, output, last_actions, name, last_reward)


def make_shared_body_network(network, output: int, name: str = "agent") -> SharedBodyNetwork | None:
    """TorchBeast's feed-forward agent network when `network.shared_body` is true and there
    is no core, else None: `network.torso` (or `network.conv_filters`) as a body shared by
    `network.policy_layers` then a policy output of size `output` (gain 0.01) and
    `network.value_layers` then a baseline (gain 1). With a core the body is always shared
    (`make_core_network`)."""
    if not network.get("shared_body", False) or network.get("core", "none") != "none":
        return None
    body = MLP(
        (),
        None,
        network.activation,
        name="body",
        conv_filters=network.conv_filters,
        torso=make_torso(network),
    )
    policy = MLP(network.policy_layers, output, network.activation, 0.01, "policy")
    baseline = MLP(network.value_layers, 1, network.activation, 1.0, "baseline")
    return SharedBodyNetwork(body, policy, baseline, name)


def make_feedforward(
    network,
    layers: Sequence[int],
    output: int,
    output_gain: float,
    name: str,
    topologies: Sequence[str] = (),
):
    """An `MLP` (after `network.conv_filters` convolutions or `network.torso`, if any).

    `topologies` are unused: an MLP reads a mixed batch's padded observations as vectors.
    """
    del topologies
    return MLP(
        layers,
        output,
        network.activation,
        output_gain,
        name,
        network.conv_filters,
        torso=make_torso(network),
    )


def make_recurrent(
    network,
    layers: Sequence[int],
    output: int,
    output_gain: float,
    name: str,
    topologies: Sequence[str] = (),
):
    """A `RecurrentNetwork`: a `network.name` cell ('gru' or 'lstm'), then an MLP.

    `topologies` are unused, as in `make_feedforward`.
    """
    del topologies
    return RecurrentNetwork(
        network.name, network.recurrent_units, layers, output, network.activation, output_gain, name
    )


def make_graph(
    network,
    layers: Sequence[int],
    output: int,
    output_gain: float,
    name: str,
    topologies: Sequence[str] = (),
):
    """A `GraphNetwork` on `make_graph_features(network, topologies)` (`topologies`:
    `env.topologies`, a mixed batch's), as `make_population_network` builds ES's: the
    actor if `output` is the number of actions A (routing: K paths), else the critic.

    `layers` are unused: the graph network's sizes are `network.link_state_size`,
    `network.readout_units` and `network.message_passing_steps`; `network.path_readout`
    is the actor's (the critic sums all vertices).
    """
    from batchrl.networks.graph import GraphNetwork

    del layers
    features = make_graph_features(network, topologies)
    if output not in (1, features.num_actions):
        raise ConfigError(
            f"network.name=graph outputs A = {features.num_actions} scores (the policy) or "
            f"one value (the critic), not {output}: is the environment a "
            f"{network.graph_features} one?"
        )
    critic = output == 1 and features.num_actions != 1
    return GraphNetwork(
        features,
        critic=critic,
        link_state_size=network.link_state_size,
        readout_units=network.readout_units,
        message_passing_steps=network.message_passing_steps,
        output_gain=output_gain,
        name=name,
        path_readout=network.path_readout and not critic,
    )


def make_population_network(
    network, observ_size: int, output: int, topologies: Sequence[str] = ()
) -> PopulationNetwork:
    """The batched-parameters network ES evaluates a population with.

    `network.name` feedforward gives a `PopulationMLP` of `network.policy_layers`; graph
    gives a `GraphPopulation` on `make_graph_features(network, topologies)` (`topologies`:
    `env.topologies`, a mixed batch's).

    Raises:
      ConfigError: `network.name` has no population form.
    """
    if network.name == "feedforward":
        return PopulationMLP(observ_size, network.policy_layers, output, network.activation)
    if network.name == "graph":
        from batchrl.networks.graph import GraphPopulation

        return GraphPopulation(
            make_graph_features(network, topologies),
            network.link_state_size,
            network.readout_units,
            network.message_passing_steps,
            path_readout=network.path_readout,
        )
    raise ConfigError(
        f"network.name={network.name!r} has no population form for ES; valid choices are "
        f"{list(POPULATION_NETWORKS)}."
    )


POPULATION_NETWORKS = ("feedforward", "graph")


def check_graph_config(network, topologies: Sequence[str] = ()) -> None:
    """Raises ConfigError on a `network` section graph cannot build (without building it).

    `topologies` are `env.topologies` (a mixed batch's), which a graph network reads when
    `network.topology` is empty.
    """
    GRAPH_FEATURES.resolve(network.graph_features)
    if network.topology and topologies:
        raise ConfigError(
            f"network.topology={network.topology!r} with env.topologies={list(topologies)}: "
            "a graph network on a mixed batch reads env.topologies; set network.topology: ''."
        )
    if not network.topology and not topologies:
        make_graph_features(network)
    for key, least in (("link_state_size", 4), ("readout_units", 1), ("message_passing_steps", 1)):
        if network[key] < least:
            raise ConfigError(f"Invalid network.{key}={network[key]}; valid values are >= {least}.")


def make_graph_features(network, topologies: Sequence[str] = ()):
    """What the graph network reads the observations as: the `GraphFeatures` that
    `network.graph_features` names (routing: `batchrl.envs.routing.RoutingGraphFeatures`),
    built on `network.topology`, the environment's, or, when that is empty, on the list
    `topologies` (`env.topologies`, a mixed batch's).

    Raises:
      ConfigError: both are empty, or the topology does not load.
    """
    if not network.topology and not topologies:
        raise ConfigError(
            "network.name=graph needs network.topology: nsfnet, geant2 or the path of a "
            "topology JSON file (the environment's topology), or env.topologies for a "
            "mixed batch."
        )
    features = GRAPH_FEATURES.resolve(network.graph_features)
    key, source = ("network.topology", network.topology)
    if not network.topology:
        key, source = ("env.topologies", list(topologies))
    try:
        return features(source)
    except (OSError, ValueError) as error:
        raise ConfigError(f"{key}={source!r}: {error}") from None


def make_network(
    network,
    layers: Sequence[int],
    output: int,
    output_gain: float = 1.0,
    name: str = "network",
    topologies: Sequence[str] = (),
) -> tf.Module:
    """The network `network.name` names, from the registry or an entry point.

    Args:
      network: the `network` section of a config (`name`, `activation`, `conv_filters`,
        `recurrent_units`, ...).
      layers: hidden layer sizes, e.g. `network.policy_layers`.
      output: the size of the output layer.
      output_gain: gain of the output layer's orthogonal initialization.
      name: the module's name.
      topologies: `env.topologies`, a mixed batch's; when not empty, passed on to the
        builder as `topologies=` (graph builds its features on them, the registered
        others ignore them), so that an entry point of one's own needs that keyword
        only to train on mixed batches.

    Returns:
      A `tf.Module` called on observations [N, ...]; a recurrent one has `state_size`,
      `initial_state(N)`, `__call__(observ, state)` and `unroll(observ, first, state)`.

    Raises:
      ConfigError: `network.name` names no network.
    """
    builder = NETWORKS.resolve(network.name)
    if topologies:
        return builder(network, layers, output, output_gain, name, topologies=topologies)
    return builder(network, layers, output, output_gain, name)


def is_recurrent(network) -> bool:
    """Whether `network.name` names a recurrent network (one with a state)."""
    return network.name in ("gru", "lstm")


def check_network_section(config) -> None:
    """Raises ConfigError on a `network` section no network can be built from, naming the
    key; without building one."""
    network, algorithm = config.network, config.algorithm.name
    NETWORKS.resolve(network.name)
    population = config.train.population
    if population > 1 and network.name not in MEMBER_NETWORKS:
        raise ConfigError(
            f"train.population={population} does not support network.name="
            f"{network.name!r}; a population needs network.name one of "
            f"{list(MEMBER_NETWORKS)}, or train.population=1."
        )
    check_choice("network.activation", network.activation, sorted(ACTIVATIONS))
    for key in ("policy_layers", "value_layers", "conv_filters"):
        require(
            all(units > 0 for units in network[key]),
            f"network.{key}",
            list(network[key]),
            "a list of positive sizes",
        )
    require(network.recurrent_units > 0, "network.recurrent_units", network.recurrent_units, "> 0")
    check_choice("network.torso", network.torso, ("none", *TORSOS))
    check_choice("network.core", network.core, ("none", *CELLS))
    require(network.core_size > 0, "network.core_size", network.core_size, "> 0")
    require(
        isinstance(network.shared_body, bool),
        "network.shared_body",
        network.shared_body,
        "true or false",
    )
    _check_core_inputs(network)
    if network.torso != "none" and network.conv_filters:
        raise ConfigError(
            f"network.torso={network.torso!r} brings its own convolutions; set "
            f"network.conv_filters=[] (got {list(network.conv_filters)})."
        )
    # The torso, the core and the shared body are IMPALA's network (Espeholt et al. 2018).
    impala_only = (
        ("torso", network.torso != "none", f"{network.torso!r}", "'none'"),
        (
            "shared_body",
            network.shared_body,
            "true (one body under the policy and the baseline)",
            "false",
        ),
        (
            "core",
            network.core != "none",
            f"{network.core!r}",
            "'none' (PPO's recurrent policies: network.name='lstm' or 'gru')",
        ),
    )
    for key, chosen, value, off in impala_only:
        if chosen and algorithm != "impala":
            raise ConfigError(
                f"network.{key}={value} is built by IMPALA only (algorithm.name='impala'), "
                f"not algorithm.name={algorithm!r}; use network.{key}={off}."
            )


def _check_core_inputs(network) -> None:
    """`network.core_inputs`: distinct names of `CORE_INPUTS`, and only with a core."""
    inputs = list(network.core_inputs)
    for name in inputs:
        check_choice("network.core_inputs", name, CORE_INPUTS)
    if len(set(inputs)) < len(inputs):
        raise ConfigError(f"network.core_inputs={inputs} names an input twice.")
    if inputs and network.core == "none":
        raise ConfigError(
            f"network.core_inputs={inputs} are inputs of the recurrent core: set "
            "network.core to 'lstm' or 'gru', or network.core_inputs=[]."
        )


SECTION = Section("network", Path(__file__).with_name("network.yaml"), check=check_network_section)
