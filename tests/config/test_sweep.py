"""--sweep KEY=v1,v2,...: the product of the sweeps as one population, bad sweeps refused."""

import pytest

from batchrl.config import ConfigError, load_run_config
from batchrl.config.members import member_settings, sweep_overrides


def test_the_product_of_two_sweeps_is_one_population():
    overrides = sweep_overrides(["ppo.learning_rate=1e-4,1e-3", "train.seed=0,1,2"])
    assert overrides == [
        "train.population=6",
        "ppo.learning_rate=[0.0001, 0.0001, 0.0001, 0.001, 0.001, 0.001]",
        "train.seeds=[0, 1, 2, 0, 1, 2]",
    ]
    config = load_run_config("cartpole_tf", overrides)
    rows = member_settings(config, "ppo")
    assert [(row["seed"], row["ppo.learning_rate"]) for row in rows] == [
        (0, 1e-4),
        (1, 1e-4),
        (2, 1e-4),
        (0, 1e-3),
        (1, 1e-3),
        (2, 1e-3),
    ]


def test_a_sweep_of_one_value_is_a_plain_override():
    assert sweep_overrides(["ppo.entropy_coef=0.01", "train.seed=3"]) == [
        "ppo.entropy_coef=0.01",
        "train.seed=3",
    ]
    assert sweep_overrides([]) == []


def test_a_seed_sweep_alone():
    config = load_run_config("pendulum_tf", sweep_overrides(["train.seed=10,20"]))
    assert config.train.population == 2
    assert config.train.seeds == (10, 20)


@pytest.mark.parametrize(
    "sweeps, sets, message",
    [
        (["ppo.learning_rate"], [], r"Malformed --sweep 'ppo.learning_rate'"),
        (["ppo.learning_rate="], [], r"Malformed --sweep"),
        (["ppo.learning_rate=1e-4", "ppo.learning_rate=1e-3"], [], r"given twice"),
        (["train.population=2,4"], [], r"--sweep train.population is not a setting"),
        (["ppo.clip_ratio=0.1,[0.2]"], [], r"'\[0.2\]' is not a single value"),
        (["ppo.clip_ratio=0.1,0.2"], ["ppo.clip_ratio=0.3"], r"both set ppo.clip_ratio"),
        (["ppo.clip_ratio=0.1,0.2"], ["train.population=4"], r"both set train.population"),
    ],
)
def test_malformed_sweeps_are_refused(sweeps, sets, message):
    with pytest.raises(ConfigError, match=message):
        sweep_overrides(sweeps, sets)


@pytest.mark.parametrize(
    "sweep, message",
    [
        ("ppo.epochs=1,2", r"ppo.epochs=\[1, 2\].*shapes or loop counts"),
        ("env.num_envs=4,8", r"env.num_envs=\[4, 8\]"),
        ("ppo.objective=clip,kl_penalty", r"ppo.objective = .*expected str"),
        ("ppo.learning_rat=1e-4,1e-3", r"unknown key 'ppo.learning_rat'"),
        ("ppo.discount=0.9,2", r"ppo.discount=\(0.9, 2.0\).*\[0, 1\]"),
    ],
)
def test_sweeps_of_bad_keys_are_refused_at_load(sweep, message):
    with pytest.raises(ConfigError, match=message):
        load_run_config("cartpole_tf", sweep_overrides([sweep]))


def test_a_sweep_over_a_preset_that_trains_no_population_is_refused():
    with pytest.raises(ConfigError, match=r"impala.learning_rate=.*'impala' trains no members"):
        load_run_config("cartpole_impala", sweep_overrides(["impala.learning_rate=1e-4,1e-3"]))
