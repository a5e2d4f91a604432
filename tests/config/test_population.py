"""train.population: what a population trains, and what it refuses at load naming the key."""

import pytest

from batchrl.config import ConfigError, load_run_config
from batchrl.config.members import member_offsets, member_seeds, member_settings


def test_the_default_is_one_agent():
    assert load_run_config("cartpole_tf").train.population == 1


def test_a_population_of_the_tensorflow_presets_loads():
    for preset in ("cartpole_tf", "pendulum_tf"):
        assert load_run_config(preset, ["train.population=4"]).train.population == 4


@pytest.mark.parametrize(
    "preset, overrides, message",
    [
        ("cartpole_tf", ["train.population=0"], r"train.population=0.*>= 1"),
        ("cartpole_impala", [], r"algorithm.name='impala'.*algorithm.name='ppo'"),
        ("cartpole_es", [], r"algorithm.name='es'"),
        ("cartpole_dqn_tf", [], r"algorithm.name='dqn'"),
        ("pendulum_sac_tf", [], r"algorithm.name='sac'"),
        ("cartpole_tf", ["network.name=graph"], r"network.name='graph'.*'feedforward', 'gru'"),
        ("cartpole_tf", ["runner.name=ray"], r"runner.name='ray'.*runner.name='local'"),
        ("cartpole_tf", ["ppo.update_mode=episodes"], r"ppo.update_mode='episodes'"),
        ("cartpole_tf", ["ppo.jit_update=true"], r"ppo.jit_update=True"),
        ("cartpole_tf", ["train.export_best=true"], r"train.export_best=True"),
        ("cartpole_tf", ["train.seed=2147483646"], r"train.seed=2147483646"),
    ],
)
def test_what_a_population_cannot_train_is_refused(preset, overrides, message):
    with pytest.raises(ConfigError, match=message) as error:
        load_run_config(preset, ["train.population=3", *overrides])
    assert "train.population" in str(error.value)


def test_a_list_gives_each_member_its_value():
    config = load_run_config(
        "cartpole_tf",
        ["train.population=3", "ppo.learning_rate=[1e-4, 3e-4, 1e-3]", "ppo.discount=[0.9, 1, 1]"],
    )
    assert config.ppo.learning_rate == (1e-4, 3e-4, 1e-3)
    assert config.ppo.discount == (0.9, 1.0, 1.0)  # Ints taken as floats, as for one value.
    rows = member_settings(config, "ppo")
    assert rows[0] == {"seed": 0, "ppo.learning_rate": 1e-4, "ppo.discount": 0.9}
    assert [row["seed"] for row in rows] == [0, 1, 2]


def test_listed_seeds():
    config = load_run_config("cartpole_tf", ["train.population=3", "train.seeds=[7, 3, 7]"])
    assert member_seeds(config.train) == [7, 3, 7]
    assert member_offsets(config.train) == [7, 3, 7]  # train.seed is 0.
    plain = load_run_config("cartpole_tf", ["train.population=3", "train.seed=4"])
    assert member_seeds(plain.train) == [4, 5, 6]


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["ppo.learning_rate=[1e-4, 3e-4]"], r"ppo.learning_rate=\[0.0001, 0.0003\] has 2 values"),
        (["ppo.epochs=[1, 2, 3]"], r"ppo.epochs=\[1, 2, 3\].*shapes or loop counts"),
        (["ppo.minibatches=[1, 2, 4]"], r"ppo.minibatches=.*shapes or loop counts"),
        (["ppo.rollout_length=[8, 8, 16]"], r"ppo.rollout_length=.*shapes or loop counts"),
        (["env.num_envs=[1, 2, 3]"], r"env.num_envs=.*environments' batch"),
        (["network.recurrent_units=[8, 8, 8]"], r"network.recurrent_units=.*the networks. shapes"),
        (["network.policy_layers=[[8], [8], [8]]"], r"network.policy_layers\[0\]"),
        (["train.total_steps=[1, 2, 3]"], r"train.total_steps=.*belongs to the run"),
        (["train.seed=[1, 2, 3]"], r"train.seed=\[1, 2, 3\].*train.seeds"),
        (["train.seeds=[1, 2]"], r"train.seeds=\[1, 2\] has 2 seeds"),
        (["train.seeds=[1, 2, -1]"], r"train.seeds=.*\[0, 2\*\*31\)"),
        (["ppo.objective=[clip, clip, clip]"], r"ppo.objective = .*expected str"),
        (["ppo.normalize_reward=[true, false, true]"], r"ppo.normalize_reward = .*bool"),
        (["ppo.discount=[0.9, 1.5, 0.9]"], r"ppo.discount=\(0.9, 1.5, 0.9\).*\[0, 1\]"),
        (["ppo.epochs=[1.5, 2, 3]"], r"ppo.epochs\[0\] = 1.5.*expected int"),
    ],
)
def test_bad_member_lists_are_refused_naming_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_run_config("cartpole_tf", ["train.population=3", *overrides])


def test_a_list_needs_a_population():
    with pytest.raises(ConfigError, match=r"ppo.entropy_coef=.*train.population=1"):
        load_run_config("cartpole_tf", ["ppo.entropy_coef=[0.0]"])
    with pytest.raises(ConfigError, match=r"train.seeds=\[3\].*train.population=1"):
        load_run_config("cartpole_tf", ["train.seeds=[3]"])


def test_other_algorithms_take_no_lists():
    with pytest.raises(ConfigError, match=r"impala.learning_rate=.*'impala' trains no members"):
        load_run_config("cartpole_impala", ["impala.learning_rate=[1e-3]"])


def test_population_based_training_loads():
    config = load_run_config(
        "cartpole_tf",
        [
            "train.population=4",
            "train.eval_every=4096",
            "pbt.interval=8192",
            "pbt.perturb=[learning_rate, entropy_coef]",
        ],
    )
    assert config.pbt.perturb == ("learning_rate", "entropy_coef")
    rows = member_settings(config, "ppo")
    ppo = config.ppo  # The preset's, the same for every member until PBT changes them.
    assert rows[3] == {
        "seed": 3,
        "ppo.learning_rate": ppo.learning_rate,
        "ppo.entropy_coef": ppo.entropy_coef,
    }


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["train.population=1"], r"train.population=1; it must be >= 2 with pbt"),
        (["train.eval_every=3000"], r"pbt.interval=8192; it must be a multiple of train.eval"),
        (["train.eval_every=0"], r"pbt.interval=8192; it must be a multiple"),
        (["pbt.quantile=0.75"], r"pbt.quantile=0.75"),
        (["pbt.perturb=[epochs]"], r"pbt.perturb=\['epochs'\]: 'epochs' is not a setting"),
        (["pbt.factors=[]"], r"pbt.factors=\[\]"),
        (["pbt.factors=[0.8, -1]"], r"pbt.factors=\[0.8, -1.0\]"),
        # A copy takes its parent's settings; a normalizer's clip is fixed at the start.
        (["ppo.reward_clip=[10, 5, 5, 5]"], r"ppo.reward_clip=\[10.0, 5.0, 5.0, 5.0\] gives"),
        # A call of a partial rollout: an exploit would land inside it.
        (
            ["train.steps_per_call=192"],
            r"train.steps_per_call=192 must be a multiple of ppo.rollout_length=128",
        ),
        # Calls of 128 x 16 = 2048 steps: exploits at 4096, 6144, 10240, ... not every 3072.
        (
            ["train.eval_every=1024", "pbt.interval=3072"],
            r"pbt.interval=3072 must be a multiple of .* train.steps_per_call=128 x "
            r"env.num_envs=16 = 2048",
        ),
    ],
)
def test_bad_population_based_training_is_refused(overrides, message):
    base = ["train.population=4", "train.eval_every=4096", "pbt.interval=8192"]
    with pytest.raises(ConfigError, match=message):
        load_run_config("cartpole_tf", [*base, *overrides])


@pytest.mark.parametrize("value", ["1.5", "-0.1", ".nan"])
def test_a_resample_probability_outside_zero_to_one_is_refused(value):
    base = ["train.population=4", "train.eval_every=4096", "pbt.interval=8192"]
    with pytest.raises(ConfigError, match=r"pbt.resample_probability=.*in \[0, 1\]"):
        load_run_config("cartpole_tf", [*base, f"pbt.resample_probability={value}"])


def test_a_resample_probability_and_the_new_pbt_keys_load():
    base = ["train.population=4", "train.eval_every=4096", "pbt.interval=8192"]
    keys = "[discount, value_clip, kl_target, kl_cutoff_factor, kl_cutoff_coef]"
    config = load_run_config(
        "cartpole_tf", [*base, "pbt.resample_probability=1", f"pbt.perturb={keys}"]
    )
    assert config.pbt.resample_probability == 1.0
    assert "discount" in config.pbt.perturb
