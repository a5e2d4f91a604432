"""The schema (`default.yaml` and the components' sections): a key's type is its default's;
trees are checked against it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batchrl.config.config import RESERVED, ConfigError, freeze, suggest

_SCALARS = (bool, int, float, str)


def check_schema(tree: dict[str, Any], origin: str, prefix: tuple[str, ...]) -> None:
    for key, value in tree.items():
        dotted = ".".join(prefix + (str(key),))
        if not isinstance(key, str) or not key.isidentifier() or key.startswith("_"):
            raise ConfigError(
                f"{origin}: key {dotted!r} must be a Python name without a leading _."
            )
        if key in RESERVED:
            raise ConfigError(f"{origin}: key {dotted!r} would hide Config.{key}; rename it.")
        if isinstance(value, dict):
            check_schema(value, origin, prefix + (key,))
        else:
            _check_default(dotted, value, origin)


def _check_default(dotted: str, value: Any, origin: str) -> None:
    """Checks that a default is a scalar, null or a list of one element type."""
    if isinstance(value, list):
        for i, element in enumerate(value):
            _check_default(f"{dotted}[{i}]", element, origin)
        if value:
            _check_value(dotted, value, value, origin)
    elif value is not None and not isinstance(value, _SCALARS):
        raise ConfigError(
            f"{origin}: {dotted} = {value!r} has type {_kind(value)}; defaults must be "
            "bool, int, float, str, null or lists of one of these."
        )


def merge(values, tree, schema, origin, prefix, sources, moved=None) -> None:
    """Validates `tree` against `schema` and writes it into `values`, in place."""
    for key, value in tree.items():
        dotted = ".".join(prefix + (str(key),))
        if moved and dotted in moved:
            raise ConfigError(f"{origin}: {dotted!r} has moved: {moved[dotted]}.")
        if key not in schema:
            where = f"under {'.'.join(prefix)!r}" if prefix else "at the top level"
            similar = [".".join(prefix + (k,)) for k in schema]
            raise ConfigError(
                f"{origin}: unknown key {dotted!r}{suggest(dotted, similar)}. Valid keys "
                f"{where}: {', '.join(map(str, schema)) or '(none)'}."
            )
        default = schema[key]
        if isinstance(default, dict):
            if value is None:
                continue
            if not isinstance(value, dict):
                raise ConfigError(
                    f"{origin}: {dotted} = {value!r} has type {_kind(value)}, but {dotted!r} "
                    f"is a section with keys: {', '.join(default) or '(none)'}."
                )
            merge(values[key], value, default, origin, prefix + (key,), sources, moved)
        else:
            values[key] = _check_value(dotted, value, default, origin)
            sources[dotted] = origin


def check_value(dotted: str, value: Any, default: Any, origin: str) -> Any:
    """Returns one value (not a list of one per member) converted to `default`'s type.

    Raises:
      ConfigError: naming `origin`, the key, the value and the type expected.
    """
    return _check_value(dotted, value, default, origin, lists=False)


def _element_default(default: list) -> Any:
    """A stand-in default for every element; [1, 2.5] is a list of floats."""
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in default)
    if numbers and any(isinstance(x, float) for x in default):
        return 0.0
    return default[0]


def _check_value(dotted: str, value: Any, default: Any, origin: str, lists: bool = True) -> Any:
    """Returns `value` converted to the type of `default`, or raises ConfigError.

    With `lists`, a number key also takes a list of numbers (one per member of a
    population); elements of lists take none.
    """
    if isinstance(default, list):
        if isinstance(value, (list, tuple)):
            element = _element_default(default) if default else None
            return [
                _check_value(f"{dotted}[{i}]", x, element, origin, lists=False)
                for i, x in enumerate(value)
            ]
        expected = f"list of {_expected(_element_default(default))}" if default else "list"
    elif default is None:
        if value is None or isinstance(value, _SCALARS):
            return value
        expected = "a scalar or null (the default is null)"
    elif isinstance(default, bool):
        if isinstance(value, bool):
            return value
        expected = "bool (true or false)"
    elif lists and _is_number(default) and isinstance(value, (list, tuple)) and value:
        # One value for each member of a population; `check_member_lists` decides where.
        return [
            _check_value(f"{dotted}[{i}]", x, default, origin, lists=False)
            for i, x in enumerate(value)
        ]
    elif isinstance(default, float):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        expected = "float (an int is accepted)"
    elif isinstance(value, type(default)) and not isinstance(value, bool):
        return value
    else:
        expected = _expected(default)
    raise ConfigError(
        f"{origin}: {dotted} = {value!r} has type {_kind(value)}, expected {expected}."
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _expected(default: Any) -> str:
    if isinstance(default, list):
        return "list"
    return "a scalar or null" if default is None else type(default).__name__


def _kind(value: Any) -> str:
    return {dict: "mapping", type(None): "null"}.get(type(value), type(value).__name__)


def check_choices(values: dict, choices: Mapping | None, sources: dict[str, str]) -> None:
    for dotted, allowed in (choices or {}).items():
        if dotted not in sources:
            raise ConfigError(f"choices name {dotted!r}, which is not a key of the config.")
        value = values
        for part in dotted.split("."):
            value = value[part]
        allowed = list(allowed)
        if freeze(value) not in [freeze(x) for x in allowed]:
            raise ConfigError(
                f"{sources[dotted]}: {dotted} = {value!r} is not a valid choice; valid "
                f"choices: {', '.join(map(repr, allowed))}."
            )
