"""--sweep KEY=v1,v2,...: the product of the sweeps as one population, bad sweeps refused."""

import pytest

from batchrl.config import ConfigError, load_run_config
from batchrl.config.members import member_settings
from batchrl.config.sweeps import parse_sweeps, sweep_overrides
from batchrl.scripts import train as train_script


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
        (["ppo.clip_ratio=0.1,"], [], r"'' is not a value"),
        (["ppo.clip_ratio=0.1,{a: 1}"], [], r"'\{a: 1\}' is not a value"),
        (["network.policy_layers=[32,32"], [], r"cannot parse '\[32,32' as YAML"),
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
        ("ppo.epochs=1,2", r"--sweep ppo.epochs=1,2: .*members cannot differ in ppo.epochs"),
        ("env.num_envs=4,8", r"--sweep env.num_envs=4,8: .*share the environments' settings"),
        ("ppo.objective=clip,kl_penalty", r"cannot differ in ppo.objective"),
        ("ppo.learning_rat=1e-4,1e-3", r"unknown key 'ppo.learning_rat'"),
        ("ppo.discount=0.9,2", r"ppo.discount=\(0.9, 2.0\).*\[0, 1\]"),
        ("ppo.clip_ratio=0.1,[0.2]", r"ppo.clip_ratio = \[0.2\] has type list, expected float"),
        # Keys that set shapes, with plain values or with lists.
        ("network.policy_layers=32,64", r"cannot differ in network.policy_layers: .*shapes"),
        ("network.policy_layers=[32,32],[64,64]", r"policy_layers=\[32, 32\],\[64, 64\]: "),
        ("network.value_layers=[8],[16]", r"cannot differ in network.value_layers: .*shapes"),
        ("network.name=feedforward,gru", r"cannot differ in network.name"),
        ("train.total_steps=64,128", r"cannot differ in train.total_steps: it belongs to the run"),
        ("pbt.interval=0,8", r"cannot differ in pbt.interval: it is not a member's setting"),
    ],
)
def test_sweeps_of_bad_keys_are_refused_at_load(sweep, message):
    with pytest.raises(ConfigError, match=message):
        load_run_config("cartpole_tf", sweeps=[sweep])


def test_a_sweep_over_a_preset_that_trains_no_population_is_refused():
    with pytest.raises(ConfigError, match=r"impala.learning_rate: .*'impala' trains no members"):
        load_run_config("cartpole_impala", sweeps=["impala.learning_rate=1e-4,1e-3"])


def test_list_values_are_split_at_the_commas_outside_brackets_and_quotes():
    swept = parse_sweeps(["network.policy_layers=[32,32],[64, 64]", "env.id='a,b',c"])
    assert swept == {"network.policy_layers": [[32, 32], [64, 64]], "env.id": ["a,b", "c"]}
    assert sweep_overrides(["network.policy_layers=[32,32],[64,64]"]) == [
        "train.population=2",
        "network.policy_layers=[[32, 32], [64, 64]]",
    ]


def test_a_key_of_one_value_in_a_sweep_is_shared_by_the_members():
    """A list-typed key may be swept over one value: every member has it."""
    sweeps = ["network.policy_layers=[16,16]", "ppo.learning_rate=1e-4,1e-3", "train.seed=7"]
    assert sweep_overrides(sweeps) == [
        "train.population=2",
        "network.policy_layers=[16, 16]",
        "ppo.learning_rate=[0.0001, 0.001]",
        "train.seeds=[7, 7]",
    ]
    config = load_run_config("cartpole_tf", sweeps=sweeps)
    assert config.network.policy_layers == (16, 16)
    assert config.ppo.learning_rate == (1e-4, 1e-3)
    assert config.train.seeds == (7, 7)


@pytest.mark.parametrize(
    "sweep", ["network.policy_layers=32,64", "network.policy_layers=[32,32],[64,64]"]
)
def test_the_train_script_refuses_a_sweep_of_network_sizes(tmp_path, capsys, monkeypatch, sweep):
    """Sweeping the layers once trained seeds of one network instead of two networks."""
    monkeypatch.chdir(tmp_path)
    code = train_script.main(["--config=cartpole_tf", "--sweep", sweep, "--logdir=run"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Config error: --sweep network.policy_layers=" in err, err
    assert "share the networks' shapes" in err, err
    assert list(tmp_path.iterdir()) == []
