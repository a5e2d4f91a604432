"""The config of a training run: its algorithm's and runner's sections, checked at load."""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from batchrl.config import loading
from batchrl.config.config import (
    Config,
    ConfigError,
)
from batchrl.config.loading import Sources
from batchrl.config.members import check_member_lists
from batchrl.config.registry import ALGORITHMS, RUNNERS
from batchrl.config.section import Section, registered_sections
from batchrl.config.sweeps import check_swept_keys, parse_sweeps, sweep_overrides

# Keys of the flat `algorithm:` section of batchrl 0.1 that went elsewhere than the
# algorithm's own section.
_OLD_KEYS = {
    "network": "network.name",
    "num_actors": "threads.num_actors (with runner.name=threads)",
    "learner_batch": "threads.learner_batch",
    "queue_size": "threads.queue_size",
    "max_actor_restarts": "threads.max_actor_restarts",
}


def load_run_config(
    name_or_path: str | os.PathLike,
    overrides: Iterable[str] = (),
    config_dir: str | os.PathLike | None = None,
    sweeps: Iterable[str] = (),
) -> Config:
    """Loads a preset with overrides and sweeps and checks every value a run will read.

    The schema is `default.yaml` with the sections the components declare
    (`batchrl.config.Section`) and the section of a user's own algorithm
    (`config_defaults`). Besides types and choices, it checks ranges, that only the
    chosen algorithm's and runner's sections are set, that the environment exists, and
    whatever the algorithm's and runner's `check_config` check: nothing needs to be built
    or written to find a bad value.

    Args:
      name_or_path: a preset name or a YAML path.
      overrides: 'dotted.key=value' strings (`--set`).
      config_dir: the folder of the presets; see `load_config`.
      sweeps: 'dotted.key=v1,v2,...' strings (`--sweep`), applied after `overrides` as
        one population (`sweep_overrides`); only keys the algorithm's members may differ
        in can take two or more values (`check_swept_keys`).

    Raises:
      ConfigError: naming the key, the bad value and what is valid.
    """
    sweeps = list(sweeps)
    overrides = [*overrides, *sweep_overrides(sweeps, overrides)]
    algo_name = loading.peek(name_or_path, "algorithm.name", overrides, config_dir)
    if sweeps and isinstance(algo_name, str):
        algo_cls = ALGORITHMS.resolve(algo_name)
        check_swept_keys(
            parse_sweeps(sweeps),
            _schema(algo_name, config_dir).to_dict(),
            algo_name,
            _section_of(algo_cls, algo_name),
            getattr(algo_cls, "member_keys", ()),
        )
    top = str(loading.preset_path(name_or_path, config_dir))
    if Path(top).resolve() == (loading.default_config_dir() / "default.yaml").resolve():
        top = ""  # The schema itself sets every key.
    return loading.load_config(
        name_or_path,
        overrides,
        config_dir,
        sections=_extra_sections(algo_name),
        moved=_moved_keys(config_dir),
        validate=lambda config, sources: check_run_config(config, sources, top),
    )


def load_saved_run_config(path: str | os.PathLike) -> Config:
    """Reads the resolved config of a run (its logdir's config.yaml) and checks it.

    A config.yaml of batchrl 0.1, whose `algorithm:` section held every algorithm's keys,
    is converted to the sections, with a warning.
    """
    algo_name = loading.peek_resolved(path, "algorithm.name")
    return loading.load_resolved_config(
        path,
        sections=_extra_sections(algo_name),
        validate=lambda config, sources: check_run_config(config),
        convert=convert_flat_config,
    )


def algorithm_class(config: Config) -> type:
    """The class `algorithm.name` names."""
    return ALGORITHMS.resolve(config.algorithm.name)


def algorithm_section(config: Config) -> str:
    """The name of the config section the chosen algorithm reads."""
    return _section_of(algorithm_class(config), config.algorithm.name)


def runner_class(config: Config) -> type:
    """The `Trainer` class `runner.name` names."""
    return RUNNERS.resolve(config.runner.name)


def check_run_config(config: Config, sources: Sources | None = None, top: str = "") -> None:
    """Raises ConfigError for any value a run cannot train with; see `load_run_config`.

    Args:
      config: the config.
      sources: where each key's value came from; with it, keys of sections the config
        does not use are refused when an override sets them, or `top` (the config file
        named on the command line) sets them and also chooses the algorithm or runner.
        Presets it builds on (`base:`) may set them, as may a preset whose algorithm an
        override replaces: a preset such as `debug` serves several algorithms.
      top: the path of the config file itself.
    """
    algo_cls = algorithm_class(config)
    runner_cls = runner_class(config)
    sections = registered_sections()
    if sources is not None:
        _check_inactive_sections(config, sources, top, sections)
    # First: the checks below read one value per key.
    check_member_lists(
        config,
        _number_keys(config.algorithm.name),
        algorithm_section(config),
        getattr(algo_cls, "member_keys", ()),
    )
    for section in sections.values():  # env, train, network, pbt, ...
        if section.check is not None:
            section.check(config)
    algo_cls.check_config(config)
    check = getattr(runner_cls, "check_config", None)
    if check is not None:
        check(config, algo_cls)


def convert_flat_config(tree: dict) -> dict:
    """Brings a resolved config of batchrl 0.1 (one flat `algorithm:` section) to sections.

    Keys of the old section go to `network`, to the named algorithm's section or to
    `threads` (`num_actors` > 0 becomes `runner.name: threads`); keys the named algorithm
    did not read are dropped. A config already in sections is returned as it is.
    """
    algorithm = tree.get("algorithm")
    if not isinstance(algorithm, dict) or set(algorithm) <= {"name"}:
        return tree
    schema = loading.load_config("default").to_dict()
    name = algorithm.get("name", "ppo")
    tree = {key: value for key, value in tree.items() if key != "algorithm"}
    tree["algorithm"] = {"name": name}
    for section in ("network", name):
        tree.setdefault(section, {})
    for key, value in algorithm.items():
        if key == "network":
            tree["network"]["name"] = value
        elif key == "num_actors":
            if value:
                tree["runner"] = {"name": "threads"}
                tree.setdefault("threads", {})["num_actors"] = value
        elif key in ("learner_batch", "queue_size", "max_actor_restarts"):
            if tree.get("runner", {}).get("name") == "threads" or algorithm.get("num_actors"):
                tree.setdefault("threads", {})[key] = value
        elif key in schema["network"]:
            tree["network"][key] = value
        elif key in schema.get(name, {}):
            tree[name][key] = value
    warnings.warn(
        "This run's config.yaml has the flat 'algorithm:' section of batchrl 0.1; it was "
        "read into the sections network, "
        f"{name} and runner. The file is rewritten in the new layout on resume.",
        stacklevel=2,
    )
    return tree


def _section_of(algo_cls: type, name: str) -> str:
    return getattr(algo_cls, "config_section", None) or name.rpartition(":")[2].lower()


def _extra_sections(algo_name: Any) -> dict[str, dict]:
    """The schema of an algorithm's own section, if its class declares one
    (`config_defaults`: a user's algorithm, registered by entry point or named by
    'package.module:Class'); registered sections are in every schema already."""
    if not isinstance(algo_name, str):
        return {}
    algo_cls = ALGORITHMS.resolve(algo_name)
    defaults = getattr(algo_cls, "config_defaults", None)
    if not defaults:
        return {}
    return {_section_of(algo_cls, algo_name): dict(defaults)}


@functools.lru_cache(maxsize=8)
def _schema(algo_name: Any, config_dir: str | os.PathLike | None = None) -> Config:
    """Every key's default, with the section of a user's own algorithm."""
    return loading.load_config(
        "default", config_dir=config_dir, sections=_extra_sections(algo_name)
    )


def _number_keys(algo_name: Any) -> tuple[str, ...]:
    """The dotted keys whose default is a number: a list there is one value per member."""
    schema = _schema(algo_name).to_dict()
    return tuple(
        f"{section}.{key}"
        for section, keys in schema.items()
        for key, default in keys.items()
        if isinstance(default, (int, float)) and not isinstance(default, bool)
    )


def _moved_keys(config_dir) -> dict[str, str]:
    """Where each key of batchrl 0.1's flat `algorithm:` section went."""
    schema = loading.load_config("default", config_dir=config_dir).to_dict()
    homes: dict[str, list[str]] = {}
    for section in ("network", *ALGORITHMS.names):
        for key in schema.get(section, {}):
            homes.setdefault(key, []).append(f"{section}.{key}")
    moved = {f"algorithm.{key}": " or ".join(places) for key, places in homes.items()}
    moved.update({f"algorithm.{key}": place for key, place in _OLD_KEYS.items()})
    return {old: f"it is {place} now" for old, place in moved.items() if old != "algorithm.name"}


def _check_inactive_sections(
    config: Config, sources: Sources, top: str, sections: dict[str, Section]
) -> None:
    """Refuses keys set in a section the config does not read: that of an algorithm or
    runner it does not choose, or one of `sections` whose `Section.read_when` says no."""
    unread = {}  # section -> (the keys that choose its reader, what to set instead)
    own = algorithm_section(config)
    for key, registry in (("algorithm.name", ALGORITHMS), ("runner.name", RUNNERS)):
        chosen = config[key.split(".")[0]].name
        for name in registry.names:
            if name != chosen and name != own:
                unread[name] = (
                    (key,),
                    f"{key}={chosen!r} does not read the {name!r} section. Remove it, or "
                    f"set {key}={name}",
                )
    for name, section in sections.items():
        if section.read_when is not None and not section.read_when(config):
            unread[name] = (
                ("algorithm.name", "runner.name"),
                f"only {section.read_by} reads the {name!r} section. Remove it, or set that",
            )
    for section, (keys, why) in unread.items():
        if section not in config:
            continue
        # A preset reused for another algorithm or runner by an override keeps its unused
        # keys: only those an override sets, or the file named on the command line when
        # no override chose the reader, are refused.
        chosen_by_override = any(sources.get(k, "").startswith("override") for k in keys)
        for name in config[section]:
            origin = sources.get(f"{section}.{name}", "")
            if origin.startswith("override") or (origin == top and not chosen_by_override):
                raise ConfigError(f"{origin}: {section}.{name} is set, but {why}.")
