"""`--sweep KEY=v1,v2,...`: the product of the swept values as one population, checked."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import ruamel.yaml

from batchrl.config.config import ConfigError, yaml_parser
from batchrl.config.members import why_members_share
from batchrl.config.schema import check_value


def parse_sweeps(sweeps: Iterable[str]) -> dict[str, list[Any]]:
    """Each swept key -> its values, in the order given.

    A value is parsed as YAML, and commas inside brackets or quotes do not separate
    values, so a list-typed key takes lists: 'network.policy_layers=[32, 32],[64, 64]'
    -> {'network.policy_layers': [[32, 32], [64, 64]]}.

    Raises:
      ConfigError: a malformed sweep, a value that is empty, null or a mapping, a key
        swept twice, or `train.population` or `train.seeds` swept.
    """
    swept = {}
    for text in sweeps:
        key, sep, raw = text.partition("=")
        key = key.strip()
        if not sep or not key or not all(key.split(".")) or not raw.strip():
            raise ConfigError(
                f"Malformed --sweep {text!r}; expected dotted.key=v1,v2,..., e.g. "
                "ppo.learning_rate=1e-4,3e-4."
            )
        if key in swept:
            raise ConfigError(f"--sweep {key} is given twice; list all its values in one.")
        if key in ("train.population", "train.seeds"):
            raise ConfigError(
                f"--sweep {key} is not a setting to sweep: the sweep sets it (sweep "
                "train.seed for seeds)."
            )
        swept[key] = [_parse_value(text, part) for part in _split(raw)]
    return swept


def sweep_overrides(sweeps: Iterable[str], overrides: Iterable[str] = ()) -> list[str]:
    """The overrides that make the product of `--sweep KEY=v1,v2,...` one population.

    With sweeps K1 of n1 values and K2 of n2, the population has n1 n2 members; member
    i takes the i-th combination in `itertools.product` order (K1 slowest). The overrides
    set `train.population` and each key to its list of member values (`train.seed` to
    `train.seeds`); a key of one value, or a product of one member, sets plain values.

        sweep_overrides(['ppo.learning_rate=1e-4,1e-3', 'train.seed=0,1'])
        -> ['train.population=4', 'ppo.learning_rate=[0.0001, 0.0001, 0.001, 0.001]',
            'train.seeds=[0, 1, 0, 1]']

    Which keys may be swept is the algorithm's to say (`check_swept_keys`, which
    `load_run_config` calls with its `sweeps`).

    Args:
      sweeps: strings 'dotted.key=v1,v2,...'; see `parse_sweeps`.
      overrides: the run's `--set` overrides, which may not set a swept key,
        `train.population` or `train.seeds`.

    Raises:
      ConfigError: a malformed sweep (see `parse_sweeps`), or a key set by an override too.
    """
    swept = parse_sweeps(sweeps)
    if not swept:
        return []
    for override in overrides:
        key = str(override).partition("=")[0].strip()
        if key in (*swept, "train.population", "train.seeds"):
            raise ConfigError(
                f"--set {override!r} and --sweep both set {key}; the sweep sets "
                "train.population, train.seeds and every swept key."
            )
    combinations = list(itertools.product(*swept.values()))
    if len(combinations) == 1:
        return [f"{key}={_dump(value)}" for key, value in zip(swept, combinations[0])]
    result = [f"train.population={len(combinations)}"]
    for index, (key, grid) in enumerate(swept.items()):
        values = [combination[index] for combination in combinations]
        if key == "train.seed":
            result.append(f"train.seeds={_dump(values)}")
        elif len(grid) == 1:  # The same for every member: a plain value.
            result.append(f"{key}={_dump(grid[0])}")
        else:
            result.append(f"{key}={_dump(values)}")
    return result


def check_swept_keys(
    swept: Mapping[str, Sequence[Any]],
    schema: Mapping[str, Any],
    algorithm: str,
    section: str,
    member_keys: Sequence[str],
) -> None:
    """Refuses a sweep of a key that the members of one population cannot differ in.

    A key swept over two or more values gives each member its own value, which only
    `train.seed` and the algorithm's `member_keys` may (the keys a population reads one
    value of per member, as `check_member_lists` allows lists for). Keys the schema lacks
    are left for the config's load to report.

    Args:
      swept: swept key -> its values (`parse_sweeps`).
      schema: the config's defaults, section -> {key: default} (plain dicts and lists).
      algorithm: `algorithm.name`, for messages.
      section: the algorithm's section.
      member_keys: the keys of `section` that a member may set on its own.

    Raises:
      ConfigError: naming the swept key and why its members cannot differ in it, or a
        swept value that is not of the key's type.
    """
    allowed = {f"{section}.{key}" for key in member_keys}
    for dotted, values in swept.items():
        prefix, _, name = dotted.partition(".")
        if not isinstance(schema.get(prefix), Mapping) or name not in schema[prefix]:
            continue
        default = schema[prefix][name]
        shown = ",".join(_dump(value) for value in values)
        why = why_members_share(dotted, algorithm, section, member_keys)
        if len(values) > 1 and why:
            own = ", ".join(["train.seed", *sorted(allowed)])
            raise ConfigError(
                f"--sweep {dotted}={shown}: a sweep trains one population whose members "
                f"differ only in the swept keys, and members cannot differ in {dotted}: "
                f"{why}. Keys a sweep may vary: {own}. Run one sweep per value of "
                f"{dotted} instead (--set {dotted}=...)."
            )
        for value in values:
            check_value(dotted, value, default, f"--sweep {dotted}={shown}")


def _split(raw: str) -> list[str]:
    """Splits at the commas outside brackets, braces and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for index, char in enumerate(raw):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(raw[start:index])
            start = index + 1
    parts.append(raw[start:])
    return parts


def _parse_value(text: str, raw: str) -> Any:
    try:
        value = yaml_parser().load(raw)
    except ruamel.yaml.YAMLError as error:
        raise ConfigError(f"--sweep {text!r}: cannot parse {raw!r} as YAML.\n{error}") from error
    if value is None or isinstance(value, Mapping):
        raise ConfigError(
            f"--sweep {text!r}: {raw.strip()!r} is not a value (a number, a string, a bool "
            "or a list in brackets)."
        )
    return value


def _dump(value: Any) -> str:
    """A value as YAML flow text for an override: 0.0001, [0.0001, 0.001], 'clip'."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_dump(x) for x in value) + "]"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)
