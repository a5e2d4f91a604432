"""Names to classes and functions: registered names or 'package.module:attribute'."""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping
from typing import Any

from batchrl.config.config import ConfigError


def load_entry_point(entry_point: str, kind: str = "object") -> Any:
    """The attribute named by 'package.module:attribute', imported on demand.

    Raises:
      ConfigError: the string has no ':', or the module or attribute cannot be imported.
    """
    module_name, sep, attribute = entry_point.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigError(
            f"{entry_point!r} is not an entry point 'package.module:Name' of a {kind}."
        )
    try:
        value = importlib.import_module(module_name)
        for part in attribute.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as error:
        raise ConfigError(f"Cannot load the {kind} {entry_point!r}: {error}") from None
    return value


class Registry:
    """Resolves the names of one kind of component (algorithm, runner, network, ...).

    Entries are entry-point strings, so that a registry in `tools` names algorithms and
    runners without importing them: a name is imported only when it is resolved. Any
    'package.module:Name' that is not registered resolves too, which is how a config names
    a user's own class (`algorithm.name=my_package.agents:Reinforce`).
    """

    def __init__(self, kind: str, key: str, entries: Mapping[str, str]):
        """Args:
        kind: what the entries are, for messages ('algorithm').
        key: the config key that names them, for messages ('algorithm.name').
        entries: registered name -> 'package.module:Name'.
        """
        self.kind = kind
        self.key = key
        self._entries = dict(entries)

    @property
    def names(self) -> list[str]:
        return sorted(self._entries)

    def register(self, name: str, entry_point: str) -> None:
        """Adds `name`, resolving to `entry_point` ('package.module:Name')."""
        if ":" in name:
            raise ValueError(f"A registered {self.kind} name cannot hold ':', got {name!r}.")
        self._entries[name] = entry_point

    def entry_point(self, name: str) -> str:
        """The 'package.module:Name' that the registered `name` resolves to."""
        return self._entries[name]

    def is_registered(self, name: str) -> bool:
        return name in self._entries

    def resolve(self, name: str) -> Any:
        """The class or function that `name` names.

        Raises:
          ConfigError: `name` is neither registered nor a loadable entry point; the
            message names the config key and the valid names.
        """
        if name in self._entries:
            return load_entry_point(self._entries[name], self.kind)
        if ":" not in name:
            close = difflib.get_close_matches(name, self.names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(
                f"Unknown {self.key}={name!r}{hint}; valid choices are {self.names} or an "
                f"entry point 'package.module:Name' of your own {self.kind}."
            )
        try:
            return load_entry_point(name, self.kind)
        except ConfigError as error:
            raise ConfigError(f"{self.key}={name!r}: {error}") from None


ALGORITHMS = Registry(
    "algorithm",
    "algorithm.name",
    {"ppo": "batchrl.algorithms.ppo:PPO", "impala": "batchrl.algorithms.impala:IMPALA"},
)
ALGORITHMS.register("es", "batchrl.algorithms.es:ES")
ALGORITHMS.register("dqn", "batchrl.algorithms.dqn:DQN")
ALGORITHMS.register("sac", "batchrl.algorithms.sac:SAC")
ALGORITHMS.register("td3", "batchrl.algorithms.sac:TD3")
RUNNERS = Registry(
    "runner",
    "runner.name",
    {
        "local": "batchrl.runners.local:LocalTrainer",
        "threads": "batchrl.runners.threads:ThreadsTrainer",
        "ray": "batchrl.runners.ray:RayTrainer",
    },
)
NETWORKS = Registry(
    "network",
    "network.name",
    {
        "feedforward": "batchrl.networks.factory:make_feedforward",
        "gru": "batchrl.networks.factory:make_recurrent",
        "lstm": "batchrl.networks.factory:make_recurrent",
        "graph": "batchrl.networks.factory:make_graph",
    },
)
# What network.name=graph reads an environment's observations as (network.graph_features):
# a class built from network.topology that holds the graph and gives its vertices'
# features (`batchrl.networks.graph.GraphFeatures`), so that networks know no environment.
GRAPH_FEATURES = Registry(
    "graph features",
    "network.graph_features",
    {"routing": "batchrl.envs.routing:RoutingGraphFeatures"},
)
# Environments written in TensorFlow ops (env.backend: tensorflow), by Gymnasium id.
ENVIRONMENTS = Registry(
    "environment in TensorFlow ops",
    "env.id",
    {
        "Acrobot-v1": "batchrl.envs.acrobot:Acrobot",
        "CartPole-v1": "batchrl.envs.cartpole:CartPole",
        "MountainCarContinuous-v0": "batchrl.envs.mountain_car_continuous:MountainCarContinuous",
        "Pendulum-v1": "batchrl.envs.pendulum:Pendulum",
        "batchrl/Routing-NSFNET-v0": "batchrl.envs.routing:make_nsfnet",
        "batchrl/Routing-GEANT2-v0": "batchrl.envs.routing:make_geant2",
        "batchrl/Routing-v0": "batchrl.envs.routing:Routing",  # On env.topologies.
    },
)
# Families of Gymnasium environments whose ids exist only once a function has run
# (Gymnasium 1.x loads no plugins by entry point): the start of their ids, or a pattern
# with '*' (fnmatch), -> 'package.module:function' that registers them. `make_env` and
# the config checks call it the first time an id that matches is asked for; register
# your own family here.
GYMNASIUM_FAMILIES = Registry(
    "Gymnasium environment family",
    "env.id",
    {
        "MinAtar/": "minatar.gym:register_envs",
        "batchrl/Routing-": "batchrl.envs.routing:register_gym_ids",
        # ale-py's Atari games: ALE/Pong-v5 (sticky actions) and the v4 NoFrameskip ids
        # that TorchBeast trains on; importing ale-py registers them all.
        "ALE/": "batchrl.tools.atari:register_envs",
        "*NoFrameskip-v4": "batchrl.tools.atari:register_envs",
        "*NoFrameskip-v0": "batchrl.tools.atari:register_envs",
    },
)
