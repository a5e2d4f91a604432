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
    require,
    require_positive,
)
from batchrl.config.loading import Sources
from batchrl.config.members import check_member_lists
from batchrl.config.registry import ALGORITHMS, RUNNERS, SECTIONS
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

    The schema is `default.yaml` plus the section of a user's own algorithm
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
    if sources is not None:
        _check_inactive_sections(config, sources, top)
    # First: the checks below read one value per key.
    check_member_lists(
        config,
        _number_keys(config.algorithm.name),
        algorithm_section(config),
        getattr(algo_cls, "member_keys", ()),
    )
    for name in SECTIONS.names:  # The env and network sections, by their owners' checks.
        SECTIONS.resolve(name)(config)
    _check_train(config.train)
    _check_population(config)
    _check_pbt(config, getattr(algo_cls, "pbt_keys", ()))
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
    'package.module:Class'); the sections of batchrl's own are in default.yaml."""
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


def _check_inactive_sections(config: Config, sources: Sources, top: str) -> None:
    """Refuses keys set in the section of an algorithm or runner the config does not use."""
    active = {algorithm_section(config), config.runner.name}
    owners = {name: "algorithm.name" for name in ALGORITHMS.names}
    owners.update({name: "runner.name" for name in RUNNERS.names})
    for section, key in owners.items():
        if section in active or section not in config:
            continue
        # A preset reused for another algorithm by an override keeps its unused keys.
        chosen_by_override = sources.get(key, "").startswith("override")
        for name in config[section]:
            origin = sources.get(f"{section}.{name}", "")
            if origin.startswith("override") or (origin == top and not chosen_by_override):
                chosen = config[key]
                raise ConfigError(
                    f"{origin}: {section}.{name} is set, but {key}={chosen!r} does not read "
                    f"the {section!r} section. Remove it, or set {key}={section}."
                )
    # Ape-X's section: DQN on the ray runner reads it.
    if "apex" in config and not (config.runner.name == "ray" and "dqn" in active):
        keys = ("runner.name", "algorithm.name")
        chosen_by_override = any(sources.get(k, "").startswith("override") for k in keys)
        for name in config.apex:
            origin = sources.get(f"apex.{name}", "")
            if origin.startswith("override") or (origin == top and not chosen_by_override):
                raise ConfigError(
                    f"{origin}: apex.{name} is set, but only algorithm.name=dqn with "
                    "runner.name=ray (Ape-X) reads the 'apex' section. Remove it, or set both."
                )


def _check_train(train: Config) -> None:
    require_positive(
        train, "train", "total_steps", "steps_per_call", "checkpoint_every", "eval_episodes"
    )
    require(train.eval_every >= 0, "train.eval_every", train.eval_every, ">= 0 (0: no evaluation)")
    require(train.max_seconds >= 0, "train.max_seconds", train.max_seconds, ">= 0 (0: no budget)")
    require(0 <= train.seed < 2**31, "train.seed", train.seed, "in [0, 2**31)")


def _check_population(config: Config) -> None:
    """Refuses what a population (`train.population` > 1) cannot train yet, naming the key."""
    population = config.train.population
    require(population >= 1, "train.population", population, ">= 1")
    if population == 1:
        return
    if not config.train.seeds:
        require(
            config.train.seed + population <= 2**31,
            "train.seed",
            config.train.seed,
            f"at most 2**31 - {population} with train.population={population} (member seeds)",
        )
    needs = {
        "algorithm.name": (config.algorithm.name, "ppo"),
        "network.name": (config.network.name, ("feedforward", "gru", "lstm")),
        "runner.name": (config.runner.name, "local"),
    }
    if config.algorithm.name == "ppo":
        needs["ppo.update_mode"] = (config.ppo.update_mode, "steps")
        needs["ppo.jit_update"] = (config.ppo.jit_update, False)
    needs["train.export_best"] = (config.train.export_best, False)
    for key, (value, valid) in needs.items():
        if value not in (valid if isinstance(valid, tuple) else (valid,)):
            valid = f"one of {list(valid)}" if isinstance(valid, tuple) else repr(valid)
            raise ConfigError(
                f"train.population={population} does not support {key}={value!r}; a "
                f"population needs {key}={valid} (PPO with feed-forward or recurrent "
                "networks, runner local), or "
                "train.population=1."
            )


def _check_pbt(config: Config, keys: tuple[str, ...]) -> None:
    """Refuses population-based training settings it cannot run, naming the key."""
    pbt, train = config.pbt, config.train
    require(pbt.interval >= 0, "pbt.interval", pbt.interval, ">= 0 (0: off)")
    probability = pbt.resample_probability
    require(0 <= probability <= 1, "pbt.resample_probability", probability, "in [0, 1]")
    if not pbt.interval:
        return
    require(train.population >= 2, "train.population", train.population, ">= 2 with pbt")
    require(
        train.eval_every > 0 and pbt.interval % train.eval_every == 0,
        "pbt.interval",
        pbt.interval,
        f"a multiple of train.eval_every={train.eval_every} (members are ranked by their "
        "latest evaluation)",
    )
    require(0 < pbt.quantile <= 0.5, "pbt.quantile", pbt.quantile, "in (0, 0.5]")
    for key in pbt.perturb:
        if key not in keys:
            raise ConfigError(
                f"Invalid pbt.perturb={list(pbt.perturb)}: {key!r} is not a setting "
                f"population-based training perturbs; valid keys are {list(keys)}."
            )
    require(
        bool(pbt.factors) and all(isinstance(f, float) and f > 0 for f in pbt.factors),
        "pbt.factors",
        list(pbt.factors),
        "a list of positive numbers",
    )
