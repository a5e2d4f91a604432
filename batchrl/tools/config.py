"""Read-only configs built from YAML presets in `batchrl/configs/` plus command-line overrides."""

from __future__ import annotations

import copy
import difflib
import io
import os
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import ruamel.yaml

import batchrl

DEFAULT_NAME = "default"
BASE_KEY = "base"
_SCALARS = (bool, int, float, str)


class ConfigError(ValueError):
    """A config file, override or choice that does not fit the schema in `default.yaml`."""


def check_choice(key: str, value, choices) -> None:
    """Raises ConfigError naming `key` and the valid `choices` when `value` is not one."""
    if value not in choices:
        raise ConfigError(f"Invalid {key}={value!r}; valid choices are {list(choices)}.")


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
            self, "_data", {str(key): _freeze(value) for key, value in dict(data).items()}
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
                f"No key {name!r} in the config{_suggest(name, self._data)}; "
                f"keys: {_listing(self)}."
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
        return _dump(self.to_dict())

    def __reduce__(self):
        return (Config, (self.to_dict(),))

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._data))

    def to_dict(self) -> dict[str, Any]:
        """Returns the config as plain nested dicts, with lists as lists."""
        return {key: _thaw(value) for key, value in self._data.items()}


_RESERVED = frozenset(name for name in dir(Config) if not name.startswith("_"))


def default_config_dir() -> Path:
    """The presets shipped with the package: `batchrl/configs/` (package data)."""
    return Path(batchrl.__file__).parent / "configs"


# What `validate` receives besides the config: dotted key -> the file or override that
# set its value (the default file for keys nobody set).
Sources = Mapping[str, str]


def load_config(
    name_or_path: str | os.PathLike,
    overrides: Iterable[str] = (),
    config_dir: str | os.PathLike | None = None,
    choices: Mapping[str, Iterable[Any]] | None = None,
    sections: Mapping[str, Mapping[str, Any]] | None = None,
    moved: Mapping[str, str] | None = None,
    validate: Callable[[Config, Sources], None] | None = None,
) -> Config:
    """Builds a config from `default.yaml`, a chain of presets and overrides.

    Precedence, lowest first: `default.yaml`, the presets named by `base:` (each
    file may name one; the default base is `default`), the file itself, and the
    overrides in order. `default.yaml` holds every key and is the schema: a key's
    type is that of its default. An int is accepted (as float) for a float key, a
    bool is not accepted for an int key, null is accepted only where the default
    is null (and then any scalar is), and list elements must have the element
    type of a non-empty default list. A section left empty (`env:` with nothing
    under it) counts as no overrides.

    Args:
        name_or_path: A config name in `config_dir` without `.yaml`, or a path
            to a YAML file (any value ending in `.yaml`/`.yml` or holding a `/`).
        overrides: Strings `dotted.key=value`; the value is parsed as YAML, so
            `3e-4` is a float, `true` a bool and `[64, 64]` a list.
        config_dir: The folder of `default.yaml` and the presets; defaults to
            `default_config_dir()`.
        choices: Optional map from dotted keys to their allowed values, e.g.
            `{'algorithm.objective': ['kl_penalty', 'clip']}`.
        sections: Further sections of the schema, name -> {key: default}, e.g. the
            section of a user's own algorithm.
        moved: Keys that no longer exist, dotted old key -> where it went; setting one
            raises a ConfigError that says so.
        validate: Called with the config and where each key's value came from; raises
            ConfigError for values no type or choice rules out.

    Returns:
        The resolved, read-only config.

    Raises:
        ConfigError: On an unknown config name, an unknown key, a wrong type, a
            value outside `choices`, a malformed override, a YAML tag, invalid
            YAML or a cycle of `base:` presets.
    """
    config_dir = _as_dir(config_dir)
    schema = _load_schema(config_dir, sections)
    values, sources = _defaults(schema, config_dir)
    for path, tree in _preset_chain(name_or_path, config_dir):
        _merge(values, tree, schema, str(path), (), sources, moved)
    for override in overrides:
        key, value = _parse_override(override)
        tree = value
        for part in reversed(key.split(".")):
            tree = {part: tree}
        _merge(values, tree, schema, f"override {override!r}", (), sources, moved)
    _check_choices(values, choices, sources)
    config = Config(values)
    if validate is not None:
        validate(config, sources)
    return config


def peek(
    name_or_path: str | os.PathLike,
    key: str,
    overrides: Iterable[str] = (),
    config_dir: str | os.PathLike | None = None,
) -> Any:
    """The raw value of dotted `key` after presets and overrides, before any validation.

    For choosing what the schema holds (the section of the algorithm a config names)
    before the config is loaded. Returns None where no file or override sets `key`.
    """
    config_dir = _as_dir(config_dir)
    value = _lookup(_read_yaml(config_dir / f"{DEFAULT_NAME}.yaml"), key)
    trees = [tree for _, tree in _preset_chain(name_or_path, config_dir)]
    for override in overrides:
        dotted, raw = _parse_override(override)
        tree = raw
        for part in reversed(dotted.split(".")):
            tree = {part: tree}
        trees.append(tree)
    for tree in trees:
        found = _lookup(tree, key)
        if found is not None:
            value = found
    return value


def peek_resolved(path: str | os.PathLike, key: str) -> Any:
    """The raw value of dotted `key` in a resolved config file, or None."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"Resolved config {path} does not exist.")
    return _lookup(_read_yaml(path), key)


def _lookup(tree: Any, key: str) -> Any:
    for part in key.split("."):
        if not isinstance(tree, Mapping) or part not in tree:
            return None
        tree = tree[part]
    return tree


def save_config(config: Config, path: str | os.PathLike) -> None:
    """Writes a resolved config as plain YAML, atomically.

    Args:
        config: The config to write.
        path: The target file; its folder is created if needed. The file is
            written to a temporary file in the same folder and then renamed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "# Resolved batchrl config; read it back with load_resolved_config().\n"
    text += _dump(Config(config).to_dict())
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def load_resolved_config(
    path: str | os.PathLike,
    config_dir: str | os.PathLike | None = None,
    choices: Mapping[str, Iterable[Any]] | None = None,
    sections: Mapping[str, Mapping[str, Any]] | None = None,
    validate: Callable[[Config, Sources], None] | None = None,
    convert: Callable[[dict], dict] | None = None,
) -> Config:
    """Reads a config written by `save_config`, validated against the current schema.

    Keys the file lacks (added to `default.yaml` since it was written) take their
    defaults, with a warning.

    Args:
        path: The YAML file, e.g. `config.yaml` in a run's logdir.
        config_dir: The folder of `default.yaml`; see `load_config`.
        choices: Allowed values per dotted key; see `load_config`.
        sections: Further sections of the schema; see `load_config`.
        validate: See `load_config`.
        convert: Called on the file's tree before it is checked, to bring a file
            of an older layout to the current one.

    Returns:
        The read-only config.

    Raises:
        ConfigError: As `load_config`, or if the file names a `base:` preset.
    """
    config_dir = _as_dir(config_dir)
    schema = _load_schema(config_dir, sections)
    values, sources = _defaults(schema, config_dir)
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"Resolved config {path} does not exist.")
    tree = _read_yaml(path)
    if convert is not None:
        tree = convert(tree)
    if BASE_KEY in tree:
        raise ConfigError(
            f"{path}: a resolved config holds every key and has no {BASE_KEY!r}; "
            "load presets with load_config() instead."
        )
    _merge(values, tree, schema, str(path), (), sources)
    default_origin = str(config_dir / f"{DEFAULT_NAME}.yaml")
    missing = [key for key, origin in sources.items() if origin == default_origin]
    if missing:
        warnings.warn(f"{path} lacks keys {missing}; using their defaults.", stacklevel=2)
    _check_choices(values, choices, sources)
    config = Config(values)
    if validate is not None:
        validate(config, sources)
    return config


def _as_dir(config_dir: str | os.PathLike | None) -> Path:
    config_dir = default_config_dir() if config_dir is None else Path(config_dir)
    if not config_dir.is_dir():
        raise ConfigError(f"Config folder {config_dir} does not exist.")
    return config_dir


def _yaml() -> ruamel.yaml.YAML:
    # The pure-Python parser behaves the same with or without ruamel.yaml.clib.
    yaml = ruamel.yaml.YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False
    return yaml


def _dump(tree: dict[str, Any]) -> str:
    stream = io.StringIO()
    _yaml().dump(tree, stream)
    return stream.getvalue()


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"Cannot read config file {path}: {error}") from error
    try:
        tree = _yaml().load(text)
    except ruamel.yaml.constructor.ConstructorError as error:
        raise ConfigError(
            f"{path}: YAML tags are not allowed; configs hold only mappings, lists and "
            f"scalars.\n{error}"
        ) from error
    except ruamel.yaml.YAMLError as error:
        raise ConfigError(f"{path}: invalid YAML.\n{error}") from error
    if tree is None:
        return {}
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of keys, got {tree!r}.")
    return tree


def _available(config_dir: Path) -> list[str]:
    return sorted(path.stem for path in config_dir.glob("*.yaml"))


def _find(name: str, config_dir: Path, origin: str = "") -> Path:
    path = config_dir / f"{name}.yaml"
    if not path.is_file():
        available = _available(config_dir)
        raise ConfigError(
            f"{origin}Unknown config {name!r}{_suggest(name, available)}; available "
            f"configs in {config_dir}: {', '.join(available) or '(none)'}."
        )
    return path


def preset_path(name_or_path: str | os.PathLike, config_dir=None) -> Path:
    """The file a config name or path names: `<config_dir>/<name>.yaml`, or the path."""
    config_dir = _as_dir(config_dir)
    text = os.fspath(name_or_path)
    if isinstance(name_or_path, os.PathLike) or text.endswith((".yaml", ".yml")) or "/" in text:
        return Path(text)
    return _find(text, config_dir)


def _preset_chain(name_or_path: str | os.PathLike, config_dir: Path) -> list[tuple[Path, dict]]:
    """Returns (path, overrides) pairs from the preset nearest the default to the file."""
    path = preset_path(name_or_path, config_dir)
    if not path.is_file():
        raise ConfigError(f"Config file {path} does not exist.")
    default_path = (config_dir / f"{DEFAULT_NAME}.yaml").resolve()
    chain, seen = [], []
    while path.resolve() != default_path:
        if path.resolve() in seen:
            names = [p.stem for p in seen] + [path.stem]
            raise ConfigError(f"Cycle in the {BASE_KEY!r} chain: {' -> '.join(names)}.")
        seen.append(path.resolve())
        tree = _read_yaml(path)
        base = tree.pop(BASE_KEY, DEFAULT_NAME)
        if not isinstance(base, str):
            raise ConfigError(f"{path}: {BASE_KEY!r} must be a config name, got {base!r}.")
        chain.append((path, tree))
        path = _find(base, config_dir, f"{path}: {BASE_KEY}: ")
    return chain[::-1]


def _load_schema(config_dir: Path, sections: Mapping | None = None) -> dict[str, Any]:
    path = config_dir / f"{DEFAULT_NAME}.yaml"
    if not path.is_file():
        raise ConfigError(
            f"No {path.name} in {config_dir}; it must hold every key and its default."
        )
    schema = _read_yaml(path)
    if BASE_KEY in schema:
        raise ConfigError(f"{path}: the default config cannot have a {BASE_KEY!r}.")
    _check_schema(schema, str(path), ())
    for name, section in (sections or {}).items():
        if name in schema:
            raise ConfigError(f"Section {name!r} is already in {path}; choose another name.")
        section = copy.deepcopy(dict(section))
        _check_schema({name: section}, f"section {name!r}", ())
        schema[name] = section
    return schema


def _check_schema(tree: dict[str, Any], origin: str, prefix: tuple[str, ...]) -> None:
    for key, value in tree.items():
        dotted = ".".join(prefix + (str(key),))
        if not isinstance(key, str) or not key.isidentifier() or key.startswith("_"):
            raise ConfigError(
                f"{origin}: key {dotted!r} must be a Python name without a leading _."
            )
        if key in _RESERVED:
            raise ConfigError(f"{origin}: key {dotted!r} would hide Config.{key}; rename it.")
        if isinstance(value, dict):
            _check_schema(value, origin, prefix + (key,))
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


def _defaults(schema: dict[str, Any], config_dir: Path) -> tuple[dict, dict[str, str]]:
    origin = str(config_dir / f"{DEFAULT_NAME}.yaml")
    sources = {}

    def visit(tree, prefix):
        for key, value in tree.items():
            if isinstance(value, dict):
                visit(value, prefix + (key,))
            else:
                sources[".".join(prefix + (key,))] = origin

    visit(schema, ())
    return copy.deepcopy(schema), sources


def _merge(values, tree, schema, origin, prefix, sources, moved=None) -> None:
    """Validates `tree` against `schema` and writes it into `values`, in place."""
    for key, value in tree.items():
        dotted = ".".join(prefix + (str(key),))
        if moved and dotted in moved:
            raise ConfigError(f"{origin}: {dotted!r} has moved: {moved[dotted]}.")
        if key not in schema:
            where = f"under {'.'.join(prefix)!r}" if prefix else "at the top level"
            similar = [".".join(prefix + (k,)) for k in schema]
            raise ConfigError(
                f"{origin}: unknown key {dotted!r}{_suggest(dotted, similar)}. Valid keys "
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
            _merge(values[key], value, default, origin, prefix + (key,), sources, moved)
        else:
            values[key] = _check_value(dotted, value, default, origin)
            sources[dotted] = origin


def _element_default(default: list) -> Any:
    """A stand-in default for every element; [1, 2.5] is a list of floats."""
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in default)
    if numbers and any(isinstance(x, float) for x in default):
        return 0.0
    return default[0]


def _check_value(dotted: str, value: Any, default: Any, origin: str) -> Any:
    """Returns `value` converted to the type of `default`, or raises ConfigError."""
    if isinstance(default, list):
        if isinstance(value, (list, tuple)):
            element = _element_default(default) if default else None
            return [_check_value(f"{dotted}[{i}]", x, element, origin) for i, x in enumerate(value)]
        expected = f"list of {_expected(_element_default(default))}" if default else "list"
    elif default is None:
        if value is None or isinstance(value, _SCALARS):
            return value
        expected = "a scalar or null (the default is null)"
    elif isinstance(default, bool):
        if isinstance(value, bool):
            return value
        expected = "bool (true or false)"
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


def _expected(default: Any) -> str:
    if isinstance(default, list):
        return "list"
    return "a scalar or null" if default is None else type(default).__name__


def _kind(value: Any) -> str:
    return {dict: "mapping", type(None): "null"}.get(type(value), type(value).__name__)


def _parse_override(text: str) -> tuple[str, Any]:
    if not isinstance(text, str):
        raise ConfigError(f"Override {text!r} must be a string dotted.key=value.")
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or not all(key.split(".")):
        raise ConfigError(
            f"Malformed override {text!r}; expected dotted.key=value, e.g. "
            "algorithm.learning_rate=3e-4."
        )
    try:
        value = _yaml().load(raw)
    except ruamel.yaml.YAMLError as error:
        raise ConfigError(f"Override {text!r}: cannot parse {raw!r} as YAML.\n{error}") from error
    return key, value


def _check_choices(values: dict, choices: Mapping | None, sources: dict[str, str]) -> None:
    for dotted, allowed in (choices or {}).items():
        if dotted not in sources:
            raise ConfigError(f"choices name {dotted!r}, which is not a key of the config.")
        value = values
        for part in dotted.split("."):
            value = value[part]
        allowed = list(allowed)
        if _freeze(value) not in [_freeze(x) for x in allowed]:
            raise ConfigError(
                f"{sources[dotted]}: {dotted} = {value!r} is not a valid choice; valid "
                f"choices: {', '.join(map(repr, allowed))}."
            )


def _suggest(name: str, candidates: Iterable[str]) -> str:
    match = difflib.get_close_matches(name, list(candidates), n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _listing(config: Config) -> str:
    return ", ".join(config._data) or "(none)"


def _freeze(value: Any) -> Any:
    if isinstance(value, Config):
        return value
    if isinstance(value, Mapping):
        return Config(value)
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(x) for x in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, Config):
        return value.to_dict()
    if isinstance(value, tuple):
        return [_thaw(x) for x in value]
    return value
