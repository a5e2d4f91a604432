"""train.population: what a population trains, and what it refuses at load naming the key."""

import pytest

from batchrl.config import ConfigError, load_run_config


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
        ("cartpole", [], r"env.backend='gymnasium'.*env.backend='tensorflow'"),
        ("cartpole_tf", ["network.name=gru"], r"network.name='gru'.*'feedforward'"),
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
