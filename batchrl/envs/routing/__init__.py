"""Routing demands through an optical transport network: topologies, environments, heuristics.

Also `RoutingGraphFeatures`, which turns the observations into the graphs and features
the graph network (`batchrl.networks.graph`) reads.
"""

import functools

import gymnasium as gym

from batchrl.envs.routing.graph_features import RoutingGraphFeatures
from batchrl.envs.routing.heuristics import HEURISTICS, Heuristic
from batchrl.envs.routing.observation import (
    DEMANDS,
    RoutingObserv,
    observation_space,
    split_observ,
)
from batchrl.envs.routing.path_masks import PathMasks
from batchrl.envs.routing.routing import Routing
from batchrl.envs.routing.routing_env import RoutingEnv
from batchrl.envs.routing.topology import (
    Topology,
    check_topology_source,
    load_topology,
    make_topology,
)
from batchrl.envs.routing.topology_set import TopologySet, make_topology_set

# Importing this package registers the Gymnasium ids of `RoutingEnv`; without the import,
# gymnasium.make("batchrl.envs.routing:batchrl/Routing-NSFNET-v0") imports it first, and
# batchrl's `make_env` calls `register_gym_ids` (its entry point in the group
# batchrl.gymnasium_families names it, in setup.cfg).
GYM_IDS = {"nsfnet": "batchrl/Routing-NSFNET-v0", "geant2": "batchrl/Routing-GEANT2-v0"}


def register_gym_ids() -> None:
    """Registers `GYM_IDS` with Gymnasium, once."""
    for topology, env_id in GYM_IDS.items():
        if env_id not in gym.registry:
            gym.register(
                id=env_id,
                entry_point="batchrl.envs.routing.routing_env:RoutingEnv",
                kwargs={"topology": topology},
            )


register_gym_ids()

# The batched environments in TensorFlow ops, by the same ids (env.backend: tensorflow).
make_nsfnet = functools.partial(Routing, topology="nsfnet")
make_geant2 = functools.partial(Routing, topology="geant2")

__all__ = [
    "DEMANDS",
    "GYM_IDS",
    "HEURISTICS",
    "Heuristic",
    "PathMasks",
    "Routing",
    "RoutingEnv",
    "RoutingGraphFeatures",
    "RoutingObserv",
    "register_gym_ids",
    "Topology",
    "TopologySet",
    "check_topology_source",
    "load_topology",
    "make_geant2",
    "make_nsfnet",
    "make_topology",
    "make_topology_set",
    "observation_space",
    "split_observ",
]
