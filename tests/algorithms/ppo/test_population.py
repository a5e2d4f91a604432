"""A member of a PPO population computes what a single run of its seed computes.

Member m of a population seeded s starts from exactly the parameters of a single run
seeded s + m, collects the same first rollout (the same discrete actions, terminations
and truncations; floats to rounding) and, after three updates, holds the same parameters
to float32 rounding: the population's batched products may round differently from a
single run's. Measured on 2026-11-26 (3 members, 4 environments each, rollouts of 16
steps, 2 epochs of 2 minibatches), the largest absolute difference over all members:

    preset        mode    first rollout   parameters after 3 updates
    pendulum_tf   graph   2.4e-7          6.0e-8
    pendulum_tf   XLA     6.0e-8          6.0e-8
    cartpole_tf   graph   3.7e-9          6.0e-8
    cartpole_tf   XLA     0               6.0e-8

The tolerance, 1e-4, is a tenth of one Adam step at cartpole_tf's learning rate.
"""

import numpy as np
import pytest
import tensorflow as tf

from batchrl.algorithms import PPO
from batchrl.algorithms.ppo import PopulationPPO
from batchrl.config import load_run_config
from batchrl.tools.environments import make_in_graph_env
from batchrl.tools.simulate import simulate

MEMBERS, SEED, ENVS, STEPS, UPDATES = 3, 5, 4, 16, 3
TOLERANCE = 1e-4


def _config(preset, population):
    return load_run_config(
        preset,
        [
            f"env.num_envs={ENVS}",
            f"ppo.rollout_length={STEPS}",
            "ppo.epochs=2",
            "ppo.minibatches=2",
            "network.policy_layers=[16, 16]",
            "network.value_layers=[16, 16]",
            f"train.population={population}",
            f"train.seed={SEED}",
        ],
    )


def _call(env, algo, jit_compile):
    return tf.function(
        lambda: simulate(env, algo, steps=STEPS), jit_compile=jit_compile, autograph=False
    )


def _member_params(population, member):
    """Member `member`'s policy and value parameters (and log std), flat."""
    params = [population.policy_params[member], population.value_params[member]]
    if population.log_std is not None:
        params.append(population.log_std[member])
    return np.concatenate([p.numpy() for p in params])


def _single_params(single, population):
    """A single run's parameters, flat in the population's layout."""
    params = [population.policy.flatten(single.policy), population.value.flatten(single.value)]
    if population.log_std is not None:
        params.append(single.head.log_std)
    return np.concatenate([tf.convert_to_tensor(p).numpy() for p in params])


@pytest.mark.parametrize(
    "jit_compile", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["graph", "xla"]
)
@pytest.mark.parametrize("preset", ["pendulum_tf", "cartpole_tf"])
def test_member_equals_single_run(preset, jit_compile):
    config = _config(preset, MEMBERS)
    env = make_in_graph_env(config.env, ENVS, SEED, members=MEMBERS)
    population = PopulationPPO(env, config, seed=SEED)
    starts = [_member_params(population, member) for member in range(MEMBERS)]
    train = _call(env, population, jit_compile)
    train()  # The first rollout, then the first update.
    first = population.rollout.read()
    for _ in range(UPDATES - 1):
        train()
    single_config = _config(preset, 1)
    rollout_diff = params_diff = 0.0
    for member in range(MEMBERS):
        seed = SEED + member
        tf.keras.utils.set_random_seed(seed)  # As the train script does.
        single_env = make_in_graph_env(config.env, ENVS, seed)
        single = PPO(single_env, single_config, seed=seed)
        np.testing.assert_array_equal(_single_params(single, population), starts[member])
        single_train = _call(single_env, single, jit_compile)
        single_train()
        columns = slice(member * ENVS, (member + 1) * ENVS)
        for key, value in single.rollout.read().items():
            if key == "first":
                continue
            if value.dtype.is_floating:
                diff = np.max(np.abs(first[key][:, columns] - value))
                rollout_diff = max(rollout_diff, float(diff))
            else:  # Discrete actions, terminations and truncations.
                np.testing.assert_array_equal(first[key][:, columns], value, err_msg=key)
        for _ in range(UPDATES - 1):
            single_train()
        diff = np.abs(_member_params(population, member) - _single_params(single, population))
        params_diff = max(params_diff, float(np.max(diff)))
    print(f"{preset} {jit_compile=}: rollout {rollout_diff:.3g}, parameters {params_diff:.3g}")
    assert rollout_diff < TOLERANCE
    assert params_diff < TOLERANCE
