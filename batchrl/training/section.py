"""The `train` config section: the run's length, evaluations, checkpoints, seeds and
population, declared in train.yaml beside this file; and its rules."""

from __future__ import annotations

from pathlib import Path

from batchrl.config import ALGORITHMS, RUNNERS, ConfigError, require, require_positive
from batchrl.config.run_config import algorithm_class, runner_class
from batchrl.config.section import Section


def check_train_section(config) -> None:
    """Raises ConfigError on a `train` section no run can follow, naming the key."""
    train = config.train
    require_positive(
        train, "train", "total_steps", "steps_per_call", "checkpoint_every", "eval_episodes"
    )
    require(train.eval_every >= 0, "train.eval_every", train.eval_every, ">= 0 (0: no evaluation)")
    require(train.max_seconds >= 0, "train.max_seconds", train.max_seconds, ">= 0 (0: no budget)")
    require(0 <= train.seed < 2**31, "train.seed", train.seed, "in [0, 2**31)")
    _check_population(config)


def _check_population(config) -> None:
    """Refuses a population (`train.population` > 1) of an algorithm or runner that does
    not train one, naming the key. What the algorithm needs of its own section and the
    network of a population, their checks say."""
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
        "algorithm.name": (algorithm_class(config), ALGORITHMS, "population_class"),
        "runner.name": (runner_class(config), RUNNERS, "trains_populations"),
    }
    for key, (cls, registry, attribute) in needs.items():
        if not getattr(cls, attribute, None):
            able = [name for name in registry.names if _has(registry, name, attribute)]
            valid = f"={able[0]!r}" if len(able) == 1 else f" one of {able}"
            raise ConfigError(
                f"train.population={population} does not support {key}="
                f"{config[key.split('.')[0]].name!r}, which trains one agent; a population "
                f"needs {key}{valid}, or train.population=1."
            )
    if config.train.export_best:
        raise ConfigError(
            f"train.population={population} does not support train.export_best=True; set "
            "it to false, or train.population=1."
        )


def _has(registry, name: str, attribute: str) -> bool:
    try:
        return bool(getattr(registry.resolve(name), attribute, None))
    except (ConfigError, ImportError):  # An optional component that is not installed.
        return False


SECTION = Section("train", Path(__file__).with_name("train.yaml"), check=check_train_section)
