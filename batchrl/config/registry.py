"""Names to classes and functions: registered names or 'package.module:attribute'.

Each kind of component has a registry, filled from the Python entry points of its group
(`batchrl.algorithms`, ...): batchrl's own components are declared in its setup.cfg, and
a user's package adds its own the same way, so nothing here names or imports one.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
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

    Entries are entry-point strings, read from the Python entry points of the registry's
    group the first time a name is asked for, so that no component is imported before it
    is resolved. `register` adds one at run time. Any 'package.module:Name' that is not
    registered resolves too, which is how a config names a user's own class without
    registering it (`algorithm.name=my_package.agents:Reinforce`).
    """

    def __init__(self, kind: str, key: str, group: str):
        """Args:
        kind: what the entries are, for messages ('algorithm').
        key: the config key that names them, for messages ('algorithm.name').
        group: the entry-point group they are declared in ('batchrl.algorithms').
        """
        self.kind = kind
        self.key = key
        self.group = group
        self._entries: dict[str, str] | None = None  # Read from the group when first used.

    def entries(self) -> dict[str, str]:
        """Registered name -> 'package.module:Name'.

        Raises:
          ConfigError: the group is empty, which means batchrl is not installed (its
            entry points are package metadata).
        """
        if self._entries is None:
            found = importlib.metadata.entry_points(group=self.group)
            self._entries = {entry.name: entry.value for entry in found}
        if not self._entries and self.group.startswith("batchrl."):
            raise ConfigError(
                f"No {self.kind} is registered in the entry-point group {self.group!r}: "
                "batchrl's components are declared as entry points, which exist once the "
                "package is installed (pip install -e . in a checkout)."
            )
        return self._entries

    @property
    def names(self) -> list[str]:
        return sorted(self.entries())

    def register(self, name: str, entry_point: str) -> None:
        """Adds `name`, resolving to `entry_point` ('package.module:Name')."""
        if ":" in name:
            raise ValueError(f"A registered {self.kind} name cannot hold ':', got {name!r}.")
        self.entries()[name] = entry_point

    def entry_point(self, name: str) -> str:
        """The 'package.module:Name' that the registered `name` resolves to."""
        return self.entries()[name]

    def is_registered(self, name: str) -> bool:
        return name in self.entries()

    def resolve(self, name: str) -> Any:
        """The class or function that `name` names.

        Raises:
          ConfigError: `name` is neither registered nor a loadable entry point; the
            message names the config key and the valid names.
        """
        if name in self.entries():
            return load_entry_point(self.entries()[name], self.kind)
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


# The kinds of component, each with its config key and entry-point group. setup.cfg's
# [options.entry_points] declares batchrl's own; a package of yours declares its own in
# the same groups (examples/reinforce/pyproject.toml; README: "Write your own algorithm").
ALGORITHMS = Registry("algorithm", "algorithm.name", "batchrl.algorithms")
RUNNERS = Registry("runner", "runner.name", "batchrl.runners")
NETWORKS = Registry("network", "network.name", "batchrl.networks")
# What network.name=graph reads an environment's observations as (network.graph_features):
# a class built from network.topology that holds the graph and gives its vertices'
# features (`batchrl.networks.graph.GraphFeatures`), so that networks know no environment.
GRAPH_FEATURES = Registry("graph features", "network.graph_features", "batchrl.graph_features")
# Environments written in TensorFlow ops (env.backend: tensorflow), by Gymnasium id.
ENVIRONMENTS = Registry("environment in TensorFlow ops", "env.id", "batchrl.tf_environments")
# Families of Gymnasium environments whose ids exist only once a function has run
# (Gymnasium 1.x loads no plugins by entry point): the start of their ids, or a pattern
# with '*' (fnmatch), -> 'package.module:function' that registers them. `make_env` and
# the config checks call it the first time an id that matches is asked for.
GYMNASIUM_FAMILIES = Registry(
    "Gymnasium environment family", "env.id", "batchrl.gymnasium_families"
)
# The config sections the components declare beside their code (`Section`: a YAML file
# of keys, defaults and docs, and a check): section name -> the `Section`. With
# configs/default.yaml they make the schema of batchrl's presets.
SECTIONS = Registry("config section", "section", "batchrl.sections")
