"""Routing demands through an optical transport network: topologies, environments, heuristics."""

import functools

import gymnasium as gym

from batchrl.envs.routing.heuristics import HEURISTICS, Heuristic
from batchrl.envs.routing.observation import (
    DEMANDS,
    RoutingObserv,
    observation_space,
    split_observ,
)
from batchrl.envs.routing.routing import Routing
from batchrl.envs.routing.routing_env import RoutingEnv
from batchrl.envs.routing.topology import Topology, load_topology, make_topology

# Importing this package registers the Gymnasium ids of `RoutingEnv`; without the import,
# gymnasium.make("batchrl.envs.routing:batchrl/Routing-NSFNET-v0") imports it first.
GYM_IDS = {"nsfnet": "batchrl/Routing-NSFNET-v0", "geant2": "batchrl/Routing-GEANT2-v0"}

for _topology, _env_id in GYM_IDS.items():
    if _env_id not in gym.registry:
        gym.register(
            id=_env_id,
            entry_point="batchrl.envs.routing.routing_env:RoutingEnv",
            kwargs={"topology": _topology},
        )

# The batched environments in TensorFlow ops, by the same ids (env.backend: tensorflow).
make_nsfnet = functools.partial(Routing, topology="nsfnet")
make_geant2 = functools.partial(Routing, topology="geant2")

__all__ = [
    "DEMANDS",
    "GYM_IDS",
    "HEURISTICS",
    "Heuristic",
    "Routing",
    "RoutingEnv",
    "RoutingObserv",
    "Topology",
    "load_topology",
    "make_geant2",
    "make_nsfnet",
    "make_topology",
    "observation_space",
    "split_observ",
]
