"""Tests of batchrl.config.config: presets, overrides, validation, read-only access, saving."""

import os
import pickle
import subprocess
import sys
import textwrap

import pytest
import ruamel.yaml

import batchrl
from batchrl import config as config_lib
from batchrl.config import Config, ConfigError, load_config, load_resolved_config, save_config

DEFAULT = """\
seed: 0
steps: 1000
logdir: null
env:
  name: Pendulum-v1
  num_envs: 8
  render: false
algorithm:
  objective: kl_penalty
  learning_rate: 1.0e-3
  discount: 0.99
  hidden_sizes: [64, 64]
  tags: []
"""

# Chain: task -> base_task -> default.
BASE_TASK = """\
env:
  name: HalfCheetah-v5
  num_envs: 16
algorithm:
  learning_rate: 3e-4
"""

TASK = """\
base: base_task
env:
  num_envs: 32
algorithm:
  discount: 1
"""

CHOICES = {"algorithm.objective": ["kl_penalty", "clip"]}


def write(directory, name, text):
    path = directory / f"{name}.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture
def config_dir(tmp_path):
    directory = tmp_path / "configs"
    directory.mkdir()
    write(directory, "default", DEFAULT)
    write(directory, "base_task", BASE_TASK)
    write(directory, "task", TASK)
    return directory


def error_of(function, *args, **kwargs):
    with pytest.raises(ConfigError) as info:
        function(*args, **kwargs)
    return str(info.value)


# Presets and overrides.


def test_default_holds_every_key(config_dir):
    config = load_config("default", config_dir=config_dir)
    assert config.to_dict() == {
        "seed": 0,
        "steps": 1000,
        "logdir": None,
        "env": {"name": "Pendulum-v1", "num_envs": 8, "render": False},
        "algorithm": {
            "objective": "kl_penalty",
            "learning_rate": 1e-3,
            "discount": 0.99,
            "hidden_sizes": [64, 64],
            "tags": [],
        },
    }


def test_precedence_default_base_task_override(config_dir):
    config = load_config("task", ["env.num_envs=64"], config_dir=config_dir)
    assert config.steps == 1000  # default
    assert config.env.name == "HalfCheetah-v5"  # base_task over default
    assert config.algorithm.learning_rate == 3e-4  # base_task over default
    assert config.algorithm.discount == 1.0  # task over default
    assert config.env.num_envs == 64  # override over task over base_task over default
    assert load_config("task", config_dir=config_dir).env.num_envs == 32  # task over base_task


def test_later_override_wins(config_dir):
    overrides = ["algorithm.learning_rate=1e-2", "algorithm.learning_rate=5e-5"]
    config = load_config("task", overrides, config_dir=config_dir)
    assert config.algorithm.learning_rate == 5e-5


def test_override_can_set_a_section_as_a_mapping(config_dir):
    config = load_config("task", ["env={name: Hopper-v5, render: true}"], config_dir=config_dir)
    assert (config.env.name, config.env.render, config.env.num_envs) == ("Hopper-v5", True, 32)


def test_load_by_path_with_base_in_config_dir(config_dir, tmp_path):
    path = write(tmp_path, "elsewhere", "base: task\nseed: 7\n")
    config = load_config(path, config_dir=config_dir)
    assert (config.seed, config.env.num_envs, config.env.name) == (7, 32, "HalfCheetah-v5")
    assert load_config(str(path), config_dir=config_dir) == config


def test_empty_section_in_file_changes_nothing(config_dir):
    write(config_dir, "empty", "env:\nalgorithm:\n")
    assert load_config("empty", config_dir=config_dir) == load_config(
        "default", config_dir=config_dir
    )


def test_default_config_dir_is_in_the_package():
    expected = os.path.join(os.path.dirname(batchrl.__file__), "configs")
    assert str(config_lib.default_config_dir()) == expected


# Types.


def test_int_accepted_for_float_and_converted(config_dir):
    config = load_config("task", config_dir=config_dir)
    assert type(config.algorithm.discount) is float and config.algorithm.discount == 1.0
    config = load_config("default", ["algorithm.learning_rate=1"], config_dir=config_dir)
    assert type(config.algorithm.learning_rate) is float


def test_scientific_notation_is_float_in_files_and_overrides(config_dir):
    config = load_config("base_task", config_dir=config_dir)  # file says 3e-4
    assert type(config.algorithm.learning_rate) is float
    assert config.algorithm.learning_rate == pytest.approx(3e-4)
    config = load_config("default", ["algorithm.learning_rate=1e-3"], config_dir=config_dir)
    assert type(config.algorithm.learning_rate) is float
    assert config.algorithm.learning_rate == pytest.approx(1e-3)


def test_override_values_are_parsed_as_yaml(config_dir):
    overrides = ["env.render=true", "algorithm.hidden_sizes=[128, 32, 8]", "env.name=Ant-v5"]
    config = load_config("default", overrides, config_dir=config_dir)
    assert config.env.render is True
    assert config.algorithm.hidden_sizes == (128, 32, 8)
    assert config.env.name == "Ant-v5"


@pytest.mark.parametrize(
    "value, expected", [("/tmp/run=1", "/tmp/run=1"), ("3", 3), ("null", None)]
)
def test_null_default_accepts_any_scalar(config_dir, value, expected):
    config = load_config("default", [f"logdir={value}"], config_dir=config_dir)
    assert config.logdir == expected


@pytest.mark.parametrize(
    "override, words",
    [
        ("env.num_envs=true", ["env.num_envs", "True", "bool", "expected int"]),
        ("env.num_envs=2.5", ["env.num_envs", "2.5", "float", "expected int"]),
        ("algorithm.learning_rate=fast", ["algorithm.learning_rate", "'fast'", "str", "float"]),
        ("env.render=1", ["env.render", "1", "int", "expected bool"]),
        ("env.name=[a]", ["env.name", "['a']", "list", "expected str"]),
        ("steps=null", ["steps", "None", "null", "expected int"]),
        ("algorithm.hidden_sizes=[64, x]", ["algorithm.hidden_sizes[1]", "'x'", "expected int"]),
        ("algorithm.hidden_sizes=64", ["algorithm.hidden_sizes", "64", "list of int"]),
        ("logdir=[1, 2]", ["logdir", "[1, 2]", "list", "null"]),
        ("env=3", ["env", "3", "section", "num_envs"]),
    ],
)
def test_wrong_type_in_override_names_key_value_and_types(config_dir, override, words):
    message = error_of(load_config, "default", [override], config_dir=config_dir)
    for word in words:
        assert word in message
    assert repr(override) in message


def test_wrong_type_in_file_names_the_file(config_dir):
    path = write(config_dir, "bad_type", "env:\n  num_envs: many\n")
    message = error_of(load_config, "bad_type", config_dir=config_dir)
    assert str(path) in message and "env.num_envs" in message and "'many'" in message


# Unknown names and keys.


def test_unknown_config_name_lists_available_configs(config_dir):
    message = error_of(load_config, "tsak", config_dir=config_dir)
    assert "'tsak'" in message
    assert "base_task, default, task" in message
    assert "did you mean 'task'" in message


def test_unknown_base_lists_available_configs(config_dir):
    path = write(config_dir, "orphan", "base: missing\n")
    message = error_of(load_config, "orphan", config_dir=config_dir)
    assert str(path) in message and "'missing'" in message and "default" in message


def test_missing_file_path(config_dir, tmp_path):
    message = error_of(load_config, tmp_path / "nowhere.yaml", config_dir=config_dir)
    assert "nowhere.yaml" in message


def test_unknown_key_in_file_names_key_and_valid_keys(config_dir):
    path = write(config_dir, "typo", "algorithm:\n  learnig_rate: 1.0\n")
    message = error_of(load_config, "typo", config_dir=config_dir)
    assert str(path) in message
    assert "'algorithm.learnig_rate'" in message
    assert "did you mean 'algorithm.learning_rate'" in message
    assert "objective, learning_rate, discount, hidden_sizes, tags" in message


def test_unknown_key_in_override_names_key_and_valid_keys(config_dir):
    message = error_of(load_config, "task", ["sead=1"], config_dir=config_dir)
    assert "'sead'" in message and "did you mean 'seed'" in message
    assert "top level: seed, steps, logdir, env, algorithm" in message
    message = error_of(load_config, "task", ["env.num_envs.x=1"], config_dir=config_dir)
    assert "env.num_envs" in message


def test_base_is_not_a_key_of_the_config(config_dir):
    message = error_of(load_config, "task", ["base=default"], config_dir=config_dir)
    assert "unknown key 'base'" in message


@pytest.mark.parametrize("override", ["algorithm.learning_rate", "=3", "env..name=x", " =1"])
def test_malformed_override(config_dir, override):
    message = error_of(load_config, "default", [override], config_dir=config_dir)
    assert "Malformed override" in message and "dotted.key=value" in message


def test_override_with_invalid_yaml_value(config_dir):
    message = error_of(
        load_config, "default", ["algorithm.hidden_sizes=[64,"], config_dir=config_dir
    )
    assert "algorithm.hidden_sizes=[64," in message


# Choices.


def test_choices_accept_valid_values(config_dir):
    config = load_config(
        "task", ["algorithm.objective=clip"], config_dir=config_dir, choices=CHOICES
    )
    assert config.algorithm.objective == "clip"


def test_bad_choice_in_override_names_key_and_choices(config_dir):
    message = error_of(
        load_config, "task", ["algorithm.objective=ppo"], config_dir=config_dir, choices=CHOICES
    )
    assert "algorithm.objective" in message and "'ppo'" in message
    assert "'kl_penalty', 'clip'" in message


def test_bad_choice_in_file_names_the_file(config_dir):
    path = write(config_dir, "bad_choice", "algorithm:\n  objective: ppo\n")
    message = error_of(load_config, "bad_choice", config_dir=config_dir, choices=CHOICES)
    assert str(path) in message and "'kl_penalty', 'clip'" in message


def test_choices_for_an_unknown_key(config_dir):
    message = error_of(load_config, "task", config_dir=config_dir, choices={"algorithm.obj": []})
    assert "'algorithm.obj'" in message


# Unsafe or broken YAML and broken chains.


def test_python_tag_in_file_is_rejected(config_dir, tmp_path):
    marker = tmp_path / "pwned"
    path = write(
        config_dir, "unsafe", f"seed: !!python/object/apply:os.system ['touch {marker}']\n"
    )
    message = error_of(load_config, "unsafe", config_dir=config_dir)
    assert str(path) in message and "tag" in message
    assert not marker.exists()


def test_python_tag_in_override_is_rejected(config_dir):
    message = error_of(load_config, "task", ["seed=!!python/name:os.system"], config_dir=config_dir)
    assert "seed=!!python/name:os.system" in message


def test_duplicate_key_in_file_is_rejected(config_dir):
    path = write(config_dir, "duplicate", "seed: 1\nseed: 2\n")
    assert str(path) in error_of(load_config, "duplicate", config_dir=config_dir)


def test_cycle_in_base_chain(config_dir):
    write(config_dir, "a", "base: b\n")
    write(config_dir, "b", "base: a\n")
    write(config_dir, "self", "base: self\n")
    assert "chain: a -> b -> a." in error_of(load_config, "a", config_dir=config_dir)
    assert "chain: self -> self." in error_of(load_config, "self", config_dir=config_dir)


def test_missing_default_yaml(tmp_path):
    write(tmp_path, "task", "seed: 1\n")
    assert "default.yaml" in error_of(load_config, "task", config_dir=tmp_path)


@pytest.mark.parametrize(
    "default, words",
    [
        ("items: 1\n", ["'items'", "Config.items"]),
        ("sizes: [1, a]\n", ["sizes[1]", "'a'"]),
        ("base: x\n", ["'base'"]),
        ("when: 2024-01-01\n", ["when", "date"]),
    ],
)
def test_invalid_schema(tmp_path, default, words):
    write(tmp_path, "default", default)
    message = error_of(load_config, "default", config_dir=tmp_path)
    for word in words:
        assert word in message


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


# The Config object.


def test_attribute_item_and_dotted_access(config_dir):
    config = load_config("task", config_dir=config_dir)
    assert config["algorithm"]["learning_rate"] == config.algorithm.learning_rate == 3e-4
    assert config["algorithm.learning_rate"] == config.get("algorithm.learning_rate") == 3e-4
    assert config.get("algorithm.nothing", "fallback") == "fallback"
    assert "env.name" in config and "env.nothing" not in config
    assert list(config) == ["seed", "steps", "logdir", "env", "algorithm"]
    assert isinstance(config.env, Config)


def test_missing_attribute_suggests_a_key(config_dir):
    config = load_config("task", config_dir=config_dir)
    with pytest.raises(AttributeError, match="did you mean 'learning_rate'"):
        config.algorithm.learning_rat  # noqa: B018
    with pytest.raises(KeyError, match="algorithm.nothing"):
        config["algorithm.nothing"]


def test_config_is_read_only(config_dir):
    config = load_config("task", config_dir=config_dir)
    with pytest.raises(AttributeError, match="read-only"):
        config.seed = 1
    with pytest.raises(AttributeError, match="read-only"):
        config.algorithm.learning_rate = 1.0
    with pytest.raises(AttributeError, match="read-only"):
        config.new_key = 1
    with pytest.raises(TypeError, match="read-only"):
        config["seed"] = 1
    with pytest.raises(TypeError, match="read-only"):
        config["env"]["name"] = "x"
    with pytest.raises(TypeError, match="read-only"):
        del config["seed"]
    with pytest.raises(AttributeError):
        config.algorithm.hidden_sizes.append(3)  # a tuple
    assert config.algorithm.hidden_sizes == (64, 64)


def test_to_dict_is_a_plain_copy(config_dir):
    config = load_config("task", config_dir=config_dir)
    tree = config.to_dict()
    assert type(tree["env"]) is dict and type(tree["algorithm"]["hidden_sizes"]) is list
    tree["algorithm"]["hidden_sizes"].append(3)
    tree["env"]["name"] = "changed"
    assert config.algorithm.hidden_sizes == (64, 64) and config.env.name == "HalfCheetah-v5"


def test_equality_hash_repr_and_pickle(config_dir):
    first = load_config("task", config_dir=config_dir)
    second = load_config("task", config_dir=config_dir)
    other = load_config("task", ["seed=1"], config_dir=config_dir)
    assert first == second and hash(first) == hash(second)
    assert first != other
    assert first != first.to_dict()
    assert "'learning_rate': 0.0003" in repr(first) and repr(first).startswith("Config(")
    assert "learning_rate: 0.0003" in str(first)
    assert pickle.loads(pickle.dumps(first)) == first


# Saving and resuming.


def test_save_and_load_resolved_round_trip(config_dir, tmp_path):
    config = load_config("task", ["algorithm.tags=[a, b]", "logdir=/runs/1"], config_dir=config_dir)
    path = tmp_path / "logdir" / "config.yaml"
    save_config(config, path)
    restored = load_resolved_config(path, config_dir=config_dir, choices=CHOICES)
    assert restored == config
    plain = ruamel.yaml.YAML(typ="safe").load(path.read_text())
    assert plain == config.to_dict()
    assert type(plain["algorithm"]["hidden_sizes"]) is list
    assert list(plain) == list(config)  # keys stay in the order of default.yaml
    assert list(plain["algorithm"]) == list(config.algorithm)
    assert os.listdir(path.parent) == ["config.yaml"]  # no temporary file left behind


def test_save_replaces_the_file_atomically(config_dir, tmp_path, monkeypatch):
    path = tmp_path / "config.yaml"
    first = load_config("default", config_dir=config_dir)
    save_config(first, path)
    before = path.read_text()

    def fail(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        save_config(load_config("task", config_dir=config_dir), path)
    assert path.read_text() == before
    assert sorted(os.listdir(tmp_path)) == ["config.yaml", "configs"]  # temporary file removed


def test_load_resolved_rejects_keys_the_schema_lacks(config_dir, tmp_path):
    config = load_config("task", config_dir=config_dir)
    path = tmp_path / "config.yaml"
    save_config(config, path)
    write(config_dir, "default", DEFAULT.replace("  discount: 0.99\n", ""))
    message = error_of(load_resolved_config, path, config_dir=config_dir)
    assert str(path) in message and "'algorithm.discount'" in message


def test_load_resolved_fills_new_keys_with_a_warning(config_dir, tmp_path):
    path = tmp_path / "config.yaml"
    save_config(load_config("task", config_dir=config_dir), path)
    write(config_dir, "default", DEFAULT + "eval_every: 10\n")
    with pytest.warns(UserWarning, match="eval_every"):
        config = load_resolved_config(path, config_dir=config_dir)
    assert config.eval_every == 10 and config.env.num_envs == 32


@pytest.mark.filterwarnings("ignore:.*lacks keys")
def test_load_resolved_validates_types_choices_and_base(config_dir, tmp_path):
    path = write(tmp_path, "resolved", "algorithm:\n  objective: ppo\n")
    assert "'kl_penalty', 'clip'" in error_of(
        load_resolved_config, path, config_dir=config_dir, choices=CHOICES
    )
    path = write(tmp_path, "resolved", "seed: zero\n")
    assert "seed" in error_of(load_resolved_config, path, config_dir=config_dir)
    path = write(tmp_path, "resolved", "base: task\n")
    assert "base" in error_of(load_resolved_config, path, config_dir=config_dir)


def test_import_does_not_load_tensorflow():
    code = "import sys, batchrl.config; assert 'tensorflow' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
