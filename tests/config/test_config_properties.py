"""Drawn configs are refused at load naming a key, with nothing written, or train and exit 0.

The generator reads the schema (`default.yaml`): each key of the algorithm's section, the
network section and the runner's section is drawn by the type of its default (bools,
small and out-of-range ints and floats, the strings the shipped presets use and one that
no code accepts, lists of sizes), on a tiny base (the `debug` preset, with budgets and
buffers cut) on CartPole-v1 and Pendulum-v1, Gymnasium's or in TensorFlow ops. A run is
what the train script does in-process: a `ConfigError` at load or from `train` is exit
code 2, any other exception a fault (exit 1), which fails the test.
"""

import json
import re

import pytest
import ruamel.yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batchrl.config import ALGORITHMS, ConfigError, default_config_dir, load_config
from batchrl.config.run_config import algorithm_section, load_run_config
from batchrl.runners import train

SCHEMA = load_config("default").to_dict()
BASE = "debug"
BACKENDS = ["gymnasium", "tensorflow"]
# The environments each algorithm trains: the action spaces it takes.
ENVS = {
    "dqn": ["CartPole-v1"],
    "sac": ["Pendulum-v1"],
    "td3": ["Pendulum-v1"],
}
# Budgets, buffers and populations cut to a few steps, for each algorithm's section; the
# drawn values replace these.
TINY = {
    "ppo": {},  # The debug preset's: rollouts of 16, 2 epochs of 2 minibatches.
    "impala": {"unroll_length": 8},
    "es": {"population": 2, "max_episode_steps": 8},
    "dqn": {"buffer_size": 64, "batch_size": 8, "learning_starts": 8, "target_update_interval": 8},
    "sac": {"buffer_size": 64, "batch_size": 8, "learning_starts": 8},
    "td3": {"buffer_size": 64, "batch_size": 8, "learning_starts": 8},
    "threads": {"num_actors": 1, "learner_batch": 1, "queue_size": 2},
}
TRAIN = [
    "train.steps_per_call=16",
    "train.eval_every=0",
    "train.eval_episodes=1",
    "train.checkpoint_every=1000000",
    "train.xla_cache=''",
    "env.eval_envs=1",
    "env.max_episode_steps=32",
    "env.processes=false",
]
DOTTED = re.compile(r"\b(" + "|".join(SCHEMA) + r")\.[a-z_]+")


def preset_values() -> dict[str, list]:
    """Each dotted key -> the values the shipped presets give it."""
    seen: dict[str, list] = {}
    for path in sorted(default_config_dir().glob("*.yaml")):
        tree = ruamel.yaml.YAML(typ="safe", pure=True).load(path.read_text())
        for section, keys in tree.items():
            if isinstance(keys, dict):
                for key, value in keys.items():
                    values = seen.setdefault(f"{section}.{key}", [])
                    if value not in values:
                        values.append(value)
    return seen


PRESET_VALUES = preset_values()
# Sizes and counts: mostly valid, sometimes zero or negative.
SIZES = st.one_of(st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from([-1, 0]))
# Rates, coefficients and probabilities: mostly in [0, 1], sometimes beyond.
FLOATS = st.one_of(st.floats(0.0, 1.0), st.floats(-0.1, 1.5)).map(lambda x: round(x, 3))


def value_strategy(section: str, key: str) -> st.SearchStrategy:
    """The values drawn for one key, by the type of its default in the schema."""
    default = SCHEMA[section][key]
    seen = [v for v in PRESET_VALUES.get(f"{section}.{key}", []) if type(v) is type(default)]
    if isinstance(default, bool):
        return st.booleans()
    if isinstance(default, int):
        small = [v for v in [default, *seen] if 0 <= v <= 64]
        return st.one_of(SIZES, st.sampled_from(small)) if small else SIZES
    if isinstance(default, float):
        return st.one_of(st.sampled_from([default, *seen]), FLOATS)
    if isinstance(default, str):
        return st.sampled_from(sorted({default, *seen, "bogus"}))
    if default is None:
        others = [v for v in PRESET_VALUES.get(f"{section}.{key}", []) if v is not None]
        return st.sampled_from([None, *others, "bogus"])
    if isinstance(default, list):
        elements = {x for v in PRESET_VALUES.get(f"{section}.{key}", []) for x in v}
        elements |= set(default)
        if all(isinstance(x, int) for x in elements):
            return st.lists(st.sampled_from([0, 2, 8]), max_size=2)
        return st.lists(st.sampled_from(sorted(map(str, elements)) + ["bogus"]), max_size=2)
    raise AssertionError(f"{section}.{key}: no strategy for the default {default!r}")


@st.composite
def section_overrides(draw, section: str, max_keys: int = 3) -> list[str]:
    """The tiny base of `section`, and up to `max_keys` of its keys drawn."""
    values = dict(TINY.get(section, {}))
    keys = draw(st.sets(st.sampled_from(sorted(SCHEMA[section])), max_size=max_keys))
    for key in sorted(keys):
        values[key] = draw(value_strategy(section, key))
    return [f"{section}.{key}={json.dumps(value)}" for key, value in values.items()]


@st.composite
def run_overrides(draw) -> list[str]:
    """A whole run: the algorithm, the runner, the environment and their sections.

    The environment is one whose actions the algorithm takes; the runner is `threads`
    only for IMPALA (the one algorithm with actors), on Gymnasium's environments.
    """
    name = draw(st.sampled_from(ALGORITHMS.names))
    runner = "threads" if name == "impala" and draw(st.booleans()) else "local"
    env_id = draw(st.sampled_from(ENVS.get(name, ["CartPole-v1", "Pendulum-v1"])))
    backend = "gymnasium" if runner == "threads" else draw(st.sampled_from(BACKENDS))
    jit_compile = backend == "tensorflow" and draw(st.booleans())
    overrides = [
        f"algorithm.name={name}",
        f"runner.name={runner}",
        f"env.id={env_id}",
        f"env.backend={backend}",
        f"env.num_envs={draw(st.sampled_from([1, 2]))}",
        f"train.jit_compile={json.dumps(jit_compile)}",
        *TRAIN,
    ]
    if name == "ppo":
        overrides.append(f"train.population={draw(st.sampled_from([1, 2]))}")
    overrides += draw(section_overrides(name))
    overrides += draw(section_overrides("network", max_keys=2))
    if runner == "threads":
        overrides += draw(section_overrides("threads", max_keys=2))
    return overrides


def steps_of_one_call(config) -> int:
    """The environment steps (each member's) of one training call, at most, for ES."""
    if config.algorithm.name == "es":  # A generation: 2 N E episodes.
        es = config.es
        length = min(es.max_episode_steps, config.env.max_episode_steps)
        return 2 * es.population * es.episodes_per_member * length
    if config.runner.name == "threads":  # learner_batch unrolls of [T, B].
        section = config[algorithm_section(config)]
        return config.threads.learner_batch * section.unroll_length * config.env.num_envs
    return config.train.steps_per_call * config.env.num_envs


def run(overrides, logdir):
    """(exit code, message, training calls) as the train script would give them."""
    try:
        config = load_run_config(BASE, overrides)
        total = 2 * steps_of_one_call(config)  # Two calls (ES: at least two).
        config = load_run_config(BASE, [*overrides, f"train.total_steps={total}"])
    except ConfigError as error:
        return 2, str(error), 0
    calls = []  # The train loop reports each call in one progress line that is not final.
    try:
        train(config, logdir, progress=lambda text, final=False: calls.append(final))
    except ConfigError as error:
        return 2, str(error), 0
    return 0, "", calls.count(False)


def check(overrides, logdir):
    code, message, calls = run(overrides, logdir)
    if code == 2:
        assert DOTTED.search(message), f"the message names no key: {message}"
        assert not logdir.exists() or not any(logdir.iterdir()), f"wrote files: {message}"
    else:
        assert calls == 2 or ("algorithm.name=es" in overrides and calls > 2), calls
        assert (logdir / "config.yaml").is_file()
    return code


PROPERTY = settings(
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@settings(PROPERTY, max_examples=6)
@given(overrides=run_overrides())
def test_a_drawn_config_is_refused_naming_a_key_or_trains(tmp_path_factory, overrides):
    check(overrides, tmp_path_factory.mktemp("run") / "logdir")


@pytest.mark.fuzz
@settings(PROPERTY, max_examples=100, derandomize=False)
@given(overrides=run_overrides())
def test_many_drawn_configs_are_refused_naming_a_key_or_train(tmp_path_factory, overrides):
    check(overrides, tmp_path_factory.mktemp("run") / "logdir")
