"""A population's members in the config: their seeds, their own settings, and sweeps."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from batchrl.config.config import Config, ConfigError

# Why a key of these sections cannot differ between members (a listed value or a sweep).
SHARED_SECTIONS = {
    "env": "the members share the environments' settings (the environments' batch and episodes)",
    "network": "the members share the networks' shapes (their parameters are stacked as [N, D])",
    "train": "it belongs to the run, not to a member",
}


def member_seeds(train: Config) -> list[int]:
    """Each member's seed: `train.seeds` if listed, else `train.seed + i` for member i."""
    if train.seeds:
        return [int(seed) for seed in train.seeds]
    return [int(train.seed) + member for member in range(int(train.population))]


def member_offsets(train: Config) -> list[int]:
    """Each member's seed less `train.seed`: environments are seeded `seed + offset`."""
    return [seed - int(train.seed) for seed in member_seeds(train)]


def listed_keys(config: Config, section: str) -> list[str]:
    """The keys of `section` that give each member its own value (a list), in order."""
    return [key for key, value in config[section].items() if _is_member_list(value)]


def member_settings(config: Config, section: str) -> list[dict[str, Any]]:
    """Each member's seed and its own value of every key of `section` given as a list.

    For the member table and the start of a run: [{'seed': 0, 'ppo.learning_rate': 1e-4},
    ...], one dict per member. Keys that population-based training changes (`pbt.perturb`)
    are listed too, from the start.
    """
    rows = [{"seed": seed} for seed in member_seeds(config.train)]
    keys = listed_keys(config, section)
    if config.pbt.interval:
        keys += [key for key in config.pbt.perturb if key not in keys]
    for key in keys:
        value = config[section][key]
        values = value if isinstance(value, tuple) else [value] * len(rows)
        for row, member_value in zip(rows, values):
            row[f"{section}.{key}"] = member_value
    return rows


def why_members_share(
    dotted: str, algorithm: str, section: str, member_keys: Sequence[str]
) -> str | None:
    """Why the members of one population cannot differ in `dotted`, or None if they may.

    They may differ in `train.seed` and in the algorithm's `member_keys` (keys of its
    `section`); in nothing else.
    """
    prefix, _, name = dotted.partition(".")
    if dotted == "train.seed" or (prefix == section and name in member_keys):
        return None
    if prefix in SHARED_SECTIONS:
        return SHARED_SECTIONS[prefix]
    if not member_keys:
        return f"algorithm {algorithm!r} trains no members with their own settings"
    if prefix == section:
        return "it sets shapes or loop counts that the members share (they run as one batch)"
    return "it is not a member's setting"


def check_member_lists(
    config: Config, scalar_keys: Iterable[str], section: str, member_keys: Sequence[str]
) -> None:
    """Refuses a list of values for a key unless it gives each member of a population one.

    Args:
      config: the config.
      scalar_keys: the dotted keys whose default is a number: a list there gives each
        member its value (the schema accepts lists of numbers for them).
      section: the algorithm's section.
      member_keys: the keys of `section` that a member may set on its own (for PPO:
        `PPO.member_keys`); the algorithm must train populations.

    Raises:
      ConfigError: naming the key and why: its value does not have one element per
        member, or the key cannot differ between members (and why not).
    """
    population = int(config.train.population)
    allowed = {f"{section}.{key}" for key in member_keys}
    for dotted in scalar_keys:
        value = config.get(dotted)
        if not isinstance(value, tuple):
            continue
        shown = list(value)
        if dotted == "train.seed":
            raise ConfigError(
                f"train.seed={shown} is a list; list the members' seeds in train.seeds "
                "instead (train.seed is the run's)."
            )
        why = why_members_share(dotted, config.algorithm.name, section, member_keys)
        if why:
            raise ConfigError(
                f"{dotted}={shown}: a list gives each member its own value, but {why}; "
                f"a member may have its own of: {', '.join(sorted(allowed))}."
            )
        if population == 1 or len(value) != population:
            raise ConfigError(
                f"{dotted}={shown} has {len(value)} values, but train.population="
                f"{population}: give one value per member, or a single value for all."
            )
    seeds = config.train.seeds
    if seeds:
        if population == 1 or len(seeds) != population:
            raise ConfigError(
                f"train.seeds={list(seeds)} has {len(seeds)} seeds, but train.population="
                f"{population}: list one seed per member (a single run takes train.seed)."
            )
        for seed in seeds:
            if not (isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed < 2**31):
                raise ConfigError(
                    f"Invalid train.seeds={list(seeds)}; each seed must be an int in [0, 2**31)."
                )


def _is_member_list(value: Any) -> bool:
    numbers = (int, float)
    return isinstance(value, tuple) and all(
        isinstance(x, numbers) and not isinstance(x, bool) for x in value
    )
