"""Configs built from YAML presets in `batchrl/configs/` and overrides, and saved back."""

from __future__ import annotations

import copy
import os
import tempfile
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import ruamel.yaml

import batchrl
from batchrl.config.config import Config, ConfigError, dump, suggest, yaml_parser
from batchrl.config.schema import check_choices, check_schema, merge
from batchrl.config.section import Section, registered_sections

DEFAULT_NAME = "default"

BASE_KEY = "base"


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
    """Builds a config from the schema's defaults, a chain of presets and overrides.

    Precedence, lowest first: the defaults, the presets named by `base:` (each
    file may name one; the default base is `default`), the file itself, and the
    overrides in order. The schema holds every key: `default.yaml` and, for batchrl's
    own presets folder, every registered section (`registered_sections`); a key's
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
            `default_config_dir()`. Another folder's `default.yaml` is its whole schema.
        choices: Optional map from dotted keys to their allowed values, e.g.
            `{'algorithm.objective': ['kl_penalty', 'clip']}`.
        sections: Further sections of the schema, name -> {key: default} or a
            `Section`, e.g. the section of a user's own algorithm.
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
    schema, origins = _load_schema(config_dir, sections)
    values, sources = _defaults(schema, origins)
    for path, tree in preset_chain(name_or_path, config_dir):
        merge(values, tree, schema, str(path), (), sources, moved)
    for override in overrides:
        key, value = _parse_override(override)
        tree = value
        for part in reversed(key.split(".")):
            tree = {part: tree}
        merge(values, tree, schema, f"override {override!r}", (), sources, moved)
    check_choices(values, choices, sources)
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
    before the config is loaded. Returns None where neither the schema's defaults, a file
    nor an override sets `key`.
    """
    config_dir = _as_dir(config_dir)
    value = _lookup(_load_schema(config_dir)[0], key)
    trees = [tree for _, tree in preset_chain(name_or_path, config_dir)]
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
    text += dump(Config(config).to_dict())
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

    Keys the file lacks (added to the schema since it was written) take their
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
    schema, origins = _load_schema(config_dir, sections)
    values, sources = _defaults(schema, origins)
    defaults = dict(sources)
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
    merge(values, tree, schema, str(path), (), sources)
    missing = [key for key, origin in sources.items() if origin == defaults[key]]
    if missing:
        warnings.warn(f"{path} lacks keys {missing}; using their defaults.", stacklevel=2)
    check_choices(values, choices, sources)
    config = Config(values)
    if validate is not None:
        validate(config, sources)
    return config


def _as_dir(config_dir: str | os.PathLike | None) -> Path:
    config_dir = default_config_dir() if config_dir is None else Path(config_dir)
    if not config_dir.is_dir():
        raise ConfigError(f"Config folder {config_dir} does not exist.")
    return config_dir


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"Cannot read config file {path}: {error}") from error
    try:
        tree = yaml_parser().load(text)
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
            f"{origin}Unknown config {name!r}{suggest(name, available)}; available "
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


def preset_chain(name_or_path: str | os.PathLike, config_dir: Path) -> list[tuple[Path, dict]]:
    """(path, values) of the preset `name_or_path` and of each preset it takes values from
    (`base:`), the one nearest the default first; the default itself is not among them.
    Raises ConfigError for a missing file or a cycle."""
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


def _load_schema(config_dir: Path, sections: Mapping | None = None) -> tuple[dict, dict]:
    """The schema, and the file that declares each of its top-level sections.

    `config_dir`'s default.yaml, with, for batchrl's own presets folder, the sections the
    components registered (`registered_sections`), and then `sections`.
    """
    path = config_dir / f"{DEFAULT_NAME}.yaml"
    if not path.is_file():
        raise ConfigError(
            f"No {path.name} in {config_dir}; it must hold every key and its default."
        )
    schema = _read_yaml(path)
    if BASE_KEY in schema:
        raise ConfigError(f"{path}: the default config cannot have a {BASE_KEY!r}.")
    check_schema(schema, str(path), ())
    origins = {name: str(path) for name in schema}
    declared: dict[str, Any] = {}
    if config_dir.resolve() == default_config_dir().resolve():
        declared.update(registered_sections())
    for name, section in {**declared, **(sections or {})}.items():
        if isinstance(section, Section):
            defaults, origin = section.defaults(), str(section.path)
        else:
            defaults, origin = dict(section), f"section {name!r}"
        if name in schema:
            raise ConfigError(
                f"Section {name!r} ({origin}) is already declared in {origins[name]}; "
                "choose another name."
            )
        schema[name] = copy.deepcopy(defaults)
        check_schema({name: schema[name]}, origin, ())
        origins[name] = origin
    return schema, origins


def _defaults(schema: dict[str, Any], origins: dict[str, str]) -> tuple[dict, dict[str, str]]:
    """The defaults as values, and each key's source: the file that declares it."""
    sources = {}

    def visit(tree, prefix):
        for key, value in tree.items():
            if isinstance(value, dict):
                visit(value, prefix + (key,))
            else:
                sources[".".join(prefix + (key,))] = origins[prefix[0] if prefix else key]

    visit(schema, ())
    return copy.deepcopy(schema), sources


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
        value = yaml_parser().load(raw)
    except ruamel.yaml.YAMLError as error:
        raise ConfigError(f"Override {text!r}: cannot parse {raw!r} as YAML.\n{error}") from error
    return key, value
