"""The read-only config object, its errors, and its YAML form."""

from __future__ import annotations

import difflib
import io
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import ruamel.yaml


class ConfigError(ValueError):
    """A config file, override or choice that does not fit the schema, or a bad value."""


def check_choice(key: str, value, choices) -> None:
    """Raises ConfigError naming `key` and the valid `choices` when `value` is not one."""
    if value not in choices:
        raise ConfigError(f"Invalid {key}={value!r}; valid choices are {list(choices)}.")


def require(ok: bool, key: str, value: Any, valid: str) -> None:
    """Raises ConfigError naming `key`, its `value` and what is `valid`, unless `ok`."""
    if not ok:
        raise ConfigError(f"Invalid {key}={value!r}; it must be {valid}.")


def require_positive(section: Mapping, prefix: str, *keys: str) -> None:
    """Raises ConfigError naming the first of `keys` of `section` that is not positive."""
    for key in keys:
        require(section[key] > 0, f"{prefix}.{key}", section[key], "positive")


def check_range(section: Mapping, prefix: str, ranges: dict[str, tuple[Callable, str]]) -> None:
    """Checks keys of `section` against ranges: key -> (predicate, description).

    Args:
      section: e.g. `config.ppo`.
      prefix: its name, for messages ('ppo').
      ranges: key -> (predicate on the value, what is valid, e.g. 'in (0, 1]').

    Raises:
      ConfigError: naming the first key whose value fails its predicate.
    """
    for key, (predicate, valid) in ranges.items():
        value = section[key]  # A tuple gives each member of a population its value.
        values = value if isinstance(value, tuple) else (value,)
        require(all(predicate(x) for x in values), f"{prefix}.{key}", value, valid)


class Config(Mapping):
    """A read-only nested mapping with attribute and dotted item access.

    `config.algorithm.learning_rate`, `config['algorithm']['learning_rate']`,
    `config['algorithm.learning_rate']` and `config.get('algorithm.learning_rate')`
    all read the same value. Nested mappings are `Config`s and lists are tuples.
    Assigning an attribute raises AttributeError and assigning an item raises
    TypeError, as for frozen dataclasses and tuples.
    """

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] = ()):
        object.__setattr__(
            self, "_data", {str(key): freeze(value) for key, value in dict(data).items()}
        )

    def __getitem__(self, key: str) -> Any:
        node = self
        for part in str(key).split("."):
            if not isinstance(node, Config) or part not in node._data:
                raise KeyError(f"No key {key!r} in the config; top-level keys: {_listing(self)}.")
            node = node._data[part]
        return node

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._data[name]
        except KeyError:
            raise AttributeError(
                f"No key {name!r} in the config{suggest(name, self._data)}; keys: {_listing(self)}."
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Config is read-only; cannot set {name!r}. Use overrides instead.")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Config is read-only; cannot delete {name!r}.")

    def __setitem__(self, key: str, value: Any) -> None:
        raise TypeError(f"Config is read-only; cannot set {key!r}. Use overrides instead.")

    def __delitem__(self, key: str) -> None:
        raise TypeError(f"Config is read-only; cannot delete {key!r}.")

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Config):
            return NotImplemented
        return self._data == other._data

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def __repr__(self) -> str:
        return f"Config({self.to_dict()!r})"

    def __str__(self) -> str:
        return dump(self.to_dict())

    def __reduce__(self):
        return (Config, (self.to_dict(),))

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._data))

    def to_dict(self) -> dict[str, Any]:
        """Returns the config as plain nested dicts, with lists as lists."""
        return {key: _thaw(value) for key, value in self._data.items()}


RESERVED = frozenset(name for name in dir(Config) if not name.startswith("_"))


def yaml_parser() -> ruamel.yaml.YAML:
    # The pure-Python parser behaves the same with or without ruamel.yaml.clib.
    yaml = ruamel.yaml.YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False
    return yaml


def dump(tree: dict[str, Any]) -> str:
    stream = io.StringIO()
    yaml_parser().dump(tree, stream)
    return stream.getvalue()


def suggest(name: str, candidates: Iterable[str]) -> str:
    match = difflib.get_close_matches(name, list(candidates), n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _listing(config: Config) -> str:
    return ", ".join(config._data) or "(none)"


def freeze(value: Any) -> Any:
    if isinstance(value, Config):
        return value
    if isinstance(value, Mapping):
        return Config(value)
    if isinstance(value, (list, tuple)):
        return tuple(freeze(x) for x in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, Config):
        return value.to_dict()
    if isinstance(value, tuple):
        return [_thaw(x) for x in value]
    return value
