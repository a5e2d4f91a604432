"""A member of a PPO population computes what a single run of its seed and settings computes.

Member m of a population starts from exactly the parameters of a single run of its seed
(seed + m, or train.seeds[m]) and its own settings (ppo keys given as lists), collects
the same first rollout (the same discrete actions, terminations and truncations; floats
to rounding) and, after three updates, holds the same parameters to float32 rounding:
the population's batched products may round differently from a single run's. Measured
on 2026-11-26 (3 members, 4 environments each, rollouts of 16 steps, 2 epochs of 2
minibatches), the largest absolute difference over all members:

    preset        settings              mode    first rollout   parameters after 3 updates
    pendulum_tf   shared                graph   2.4e-7          6.0e-8
    pendulum_tf   shared                XLA     6.0e-8          6.0e-8
    cartpole_tf   shared                graph   3.7e-9          6.0e-8
    cartpole_tf   shared                XLA     0               6.0e-8
    pendulum_tf   own (OWN)             graph   2.4e-7          6.0e-8
    pendulum_tf   own (OWN)             XLA     6.0e-8          6.0e-8
    cartpole_tf   own (OWN)             graph   1.9e-9          3.0e-8
    cartpole_tf   own (OWN)             XLA     0               6.0e-8
    pendulum_tf   own (OWN_KL), kl_pen. graph   2.4e-7          6.0e-8
    pendulum_tf   own (OWN_KL), kl_pen. XLA     6.0e-8          6.0e-8
    cartpole_tf   gru, own (OWN)        graph   9.3e-10         6.0e-8
    cartpole_tf   gru, own (OWN)        XLA     0               3.0e-8
    pendulum_tf   lstm, shared          graph   1.5e-6          6.0e-8
    pendulum_tf   lstm, shared          XLA     3.0e-8          6.0e-8

The recurrent rows have a cell of 8 units before policy layers [16].

The tolerance, 1e-4, is a tenth of one Adam step at cartpole_tf's learning rate.
"""

import numpy as np
import pytest
import tensorflow as tf

from batchrl.algorithms import PPO
from batchrl.algorithms.ppo import PopulationPPO
from batchrl.config import load_run_config
from batchrl.config.members import member_offsets
from batchrl.tools.environments import make_in_graph_env
from batchrl.tools.simulate import simulate
from batchrl.training.export import export_policy

MEMBERS, SEED, ENVS, STEPS, UPDATES = 3, 5, 4, 16, 3
TOLERANCE = 1e-4


def _config(preset, population, *overrides):
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
            *overrides,
        ],
    )


def _population(config):
    offsets = member_offsets(config.train) if config.train.seeds else None
    env = make_in_graph_env(config.env, ENVS, SEED, members=MEMBERS, offsets=offsets)
    return env, PopulationPPO(env, config, seed=SEED)


def _call(env, algo, jit_compile):
    return tf.function(
        lambda: simulate(env, algo, steps=STEPS), jit_compile=jit_compile, autograph=False
    )


def _member_params(population, member):
    """Member `member`'s policy and value parameters (and log std), flat."""
    params = [population.policy_params[member], population.value_params[member]]
    if population.log_std is not None:
        params.append(population.log_std[member])
    return np.concatenate([np.reshape(p.numpy(), [-1]) for p in params])


def _single_params(single, population):
    """A single run's parameters, flat in the population's layout."""
    params = [population.policy.flatten(single.policy), population.value.flatten(single.value)]
    if population.log_std is not None:
        params.append(single.head.log_std)
    return np.concatenate([np.reshape(tf.convert_to_tensor(p).numpy(), [-1]) for p in params])


# Each member's own settings: (population overrides, member m's single-run overrides).
OWN = {
    "ppo.learning_rate": [1e-3, 3e-4, 5e-4],
    "ppo.entropy_coef": [0.0, 0.01, 0.05],
    "ppo.clip_ratio": [0.1, 0.2, 0.3],
    "ppo.discount": [0.99, 0.95, 0.9],
    "ppo.gae_lambda": [0.95, 0.9, 0.8],
    "ppo.max_grad_norm": [0.5, 1.0, 0.1],
    "ppo.value_clip": [0.0, 0.2, 0.5],
    "ppo.value_coef": [0.5, 1.0, 0.25],
    "ppo.reward_clip": [10.0, 0.0, 1.0],
    "ppo.observ_clip": [10.0, 1.0, 0.0],
}
OWN_KL = {
    "ppo.learning_rate": [1e-3, 3e-4, 5e-4],
    "ppo.kl_target": [0.01, 0.001, 0.05],
    "ppo.kl_init_penalty": [1.0, 0.5, 2.0],
    "ppo.kl_cutoff_factor": [2.0, 1.5, 3.0],
    "ppo.kl_cutoff_coef": [1000.0, 100.0, 10.0],
}
SEEDS = [5, 11, 8]  # Listed seeds (train.seeds), with the own settings.


def _lists(settings):
    return [f"{key}={values}" for key, values in settings.items()]


def _own(settings, member):
    return [f"{key}={values[member]}" for key, values in settings.items()]


def _compare(preset, jit_compile, settings=None, extra=()):
    """Largest differences of members and single runs: the first rollout, the parameters."""
    settings = settings or {}
    seeds = SEEDS if settings else [SEED + member for member in range(MEMBERS)]
    listed = [f"train.seeds={seeds}"] if settings else []
    config = _config(preset, MEMBERS, *extra, *_lists(settings), *listed)
    env, population = _population(config)
    starts = [_member_params(population, member) for member in range(MEMBERS)]
    train = _call(env, population, jit_compile)
    train()  # The first rollout, then the first update.
    first = population.rollout.read()
    for _ in range(UPDATES - 1):
        train()
    rollout_diff = params_diff = 0.0
    for member, seed in enumerate(seeds):
        single_config = _config(preset, 1, *extra, *_own(settings, member), f"train.seed={seed}")
        tf.keras.utils.set_random_seed(seed)  # As the train script does.
        single_env = make_in_graph_env(config.env, ENVS, seed)
        single = PPO(single_env, single_config, seed=seed)
        np.testing.assert_array_equal(_single_params(single, population), starts[member])
        single_train = _call(single_env, single, jit_compile)
        single_train()
        columns = slice(member * ENVS, (member + 1) * ENVS)
        for key, value in single.rollout.read().items():
            if key not in first:  # `first`: recurrent populations only.
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
    return rollout_diff, params_diff


@pytest.mark.parametrize(
    "jit_compile", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["graph", "xla"]
)
@pytest.mark.parametrize("preset", ["pendulum_tf", "cartpole_tf"])
def test_member_equals_single_run(preset, jit_compile):
    rollout_diff, params_diff = _compare(preset, jit_compile)
    print(f"{preset} {jit_compile=}: rollout {rollout_diff:.3g}, parameters {params_diff:.3g}")
    assert rollout_diff < TOLERANCE
    assert params_diff < TOLERANCE


@pytest.mark.parametrize("gsde", ["true", "false"])
def test_gaussian_member_equals_single_run_with_and_without_gsde(gsde):
    """gSDE's members (`ppo.gsde`) draw their matrices and act as single runs do, as do
    members with a state-independent std."""
    extra = (f"ppo.gsde={gsde}", "ppo.gsde_every=3")
    rollout_diff, params_diff = _compare("pendulum_tf", False, extra=extra)
    print(f"gsde={gsde}: rollout {rollout_diff:.3g}, parameters {params_diff:.3g}")
    assert rollout_diff < TOLERANCE
    assert params_diff < TOLERANCE


@pytest.mark.slow  # Out of the default suite: 36 s on 2 busy cores (2026-12-06).
@pytest.mark.parametrize(
    "jit_compile", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["graph", "xla"]
)
@pytest.mark.parametrize(
    "preset, settings, extra",
    [
        ("pendulum_tf", OWN, ()),
        ("cartpole_tf", OWN, ()),
        ("pendulum_tf", OWN_KL, ("ppo.objective=kl_penalty",)),
    ],
    ids=["pendulum_tf", "cartpole_tf", "pendulum_tf-kl_penalty"],
)
def test_member_with_own_settings_equals_single_run_with_them(preset, settings, extra, jit_compile):
    """Member m with listed seed and settings computes what a single run with them does."""
    rollout_diff, params_diff = _compare(preset, jit_compile, settings, extra)
    print(f"{preset} {jit_compile=}: rollout {rollout_diff:.3g}, parameters {params_diff:.3g}")
    assert rollout_diff < TOLERANCE
    assert params_diff < TOLERANCE


# gSDE (pendulum_tf's) explores with a feed-forward policy's features only.
RECURRENT = ("network.recurrent_units=8", "network.policy_layers=[16]", "ppo.gsde=false")


@pytest.mark.slow  # 9 to 22 s in graph mode, 60 s under XLA, on the shared 2 cores.
@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
@pytest.mark.parametrize("preset, cell", [("cartpole_tf", "gru"), ("pendulum_tf", "lstm")])
def test_recurrent_member_equals_single_run(preset, cell, jit_compile):
    """Recurrent members (`PopulationRecurrent`), with own settings for cartpole_tf."""
    settings = OWN if preset == "cartpole_tf" else None
    extra = (f"network.name={cell}", *RECURRENT)
    rollout_diff, params_diff = _compare(preset, jit_compile, settings, extra)
    print(f"{preset} {cell} {jit_compile=}: rollout {rollout_diff:.3g}, params {params_diff:.3g}")
    assert rollout_diff < TOLERANCE
    assert params_diff < TOLERANCE


def test_a_member_with_learning_rate_zero_keeps_its_parameters():
    config = _config("pendulum_tf", MEMBERS, "ppo.learning_rate=[3e-4, 0, 1e-3]")
    env, population = _population(config)
    starts = [_member_params(population, member) for member in range(MEMBERS)]
    _call(env, population, False)()  # A rollout and an update.
    np.testing.assert_array_equal(_member_params(population, 1), starts[1])
    for member in (0, 2):
        assert np.max(np.abs(_member_params(population, member) - starts[member])) > 1e-5
    np.testing.assert_allclose(population.optimizer.rates.numpy(), [3e-4, 0, 1e-3])


@pytest.mark.parametrize(
    "preset, extra",
    [("pendulum_tf", ()), ("cartpole_tf", ()), ("pendulum_tf", ("ppo.gsde=false",))],
    ids=["pendulum_tf", "cartpole_tf", "pendulum_tf-without-gsde"],
)
def test_a_member_policy_acts_as_the_member(preset, extra, tmp_path):
    """`member_policy(m)` and its SavedModel act as member m of the population does."""
    config = _config(preset, MEMBERS, "ppo.observ_clip=[10, 0.5, 0]", *extra)
    env, population = _population(config)
    _call(env, population, False)()  # Normalizers and parameters away from their start.
    rng = np.random.default_rng(0)
    observ = rng.normal(scale=3.0, size=(7, *env.observation_space.shape)).astype(np.float32)
    actions = population.act(tf.constant(np.tile(observ, [MEMBERS, 1]))).numpy()  # [M 7, ...]
    for member in range(MEMBERS):
        rows = actions[member * 7 : (member + 1) * 7]
        policy = population.member_policy(member)
        own = policy.act(tf.constant(observ)).numpy()
        # The population multiplies [M 7] rows, the member [7]: on some CPUs the two shapes
        # take matmul kernels that round apart by a float32 ulp (seen on an AMD EPYC of
        # family 25, 2026-12-02), so the member is held to a few ulps, not to the bit.
        np.testing.assert_allclose(own, rows, rtol=1e-6, atol=1e-7)
        path = export_policy(policy, env.observation_space, tmp_path / f"member-{member}")
        loaded = tf.saved_model.load(str(path))
        np.testing.assert_allclose(loaded(observ).numpy(), own, rtol=1e-6, atol=1e-7)
    assert len(population.member_policy(0).variables) < len(population.variables)
    with pytest.raises(ValueError, match="No member 3"):
        population.member_policy(MEMBERS)


def test_exploit_copies_exactly_the_parents_state():
    """Scores 3, 1, 4, 2: member 1 takes member 2's state; its learning rate is perturbed."""
    members = 4
    config = load_run_config(
        "pendulum_tf",
        [
            f"env.num_envs={ENVS}",
            f"ppo.rollout_length={STEPS}",
            "ppo.epochs=2",
            "ppo.minibatches=2",
            "network.policy_layers=[16, 16]",
            "network.value_layers=[16, 16]",
            f"train.population={members}",
            "train.steps_per_call=16",  # 16 x 4 environments: a multiple of the interval.
            "train.eval_every=64",
            "pbt.interval=64",
            "pbt.perturb=[learning_rate, gae_lambda]",
            "ppo.learning_rate=[1e-3, 2e-3, 3e-3, 4e-3]",
            "ppo.objective=kl_penalty",
        ],
    )
    env = make_in_graph_env(config.env, ENVS, SEED, members=members)
    population = PopulationPPO(env, config, seed=SEED)
    _call(env, population, False)()  # Members apart: parameters, moments, penalties.
    _call(env, population, False)()
    state = {
        "policy": population.policy_params,
        "value": population.value_params,
        "log_std": population.log_std,
        "penalty": population.penalty,
        "observ_mean": population.observ_normalizer._mean,
        "observ_m2": population.observ_normalizer._m2,
        "reward_mean": population.reward_scaler.normalizer._mean,
        "reward_m2": population.reward_scaler.normalizer._m2,
        **{f"adam_{i}": v for i, v in enumerate(population.optimizer.member_variables())},
    }
    before = {name: variable.numpy() for name, variable in state.items()}
    assert not np.array_equal(before["policy"][1], before["policy"][2])
    assert not np.array_equal(before["adam_0"][1], before["adam_0"][2])
    rates = population.pbt_settings["learning_rate"].numpy()
    np.testing.assert_allclose(rates, [1e-3, 2e-3, 3e-3, 4e-3])
    source = population.exploit([3.0, 1.0, 4.0, 2.0], 0.25, (0.8, 1.2))
    np.testing.assert_array_equal(source, [0, 2, 2, 3])
    for name, variable in state.items():
        after = variable.numpy()
        np.testing.assert_array_equal(after[1], before[name][2], err_msg=name)
        for member in (0, 2, 3):
            np.testing.assert_array_equal(after[member], before[name][member], err_msg=name)
    new = population.pbt_settings["learning_rate"].numpy()
    assert new[1] in np.float32(3e-3) * np.float32([0.8, 1.2])
    np.testing.assert_array_equal(new[[0, 2, 3]], rates[[0, 2, 3]])
    lambdas = population.pbt_settings["gae_lambda"].numpy()
    assert lambdas[1] in np.minimum(np.float32(0.9) * np.float32([0.8, 1.2]), 1)  # pendulum_tf
    assert population.pbt_values()["ppo.learning_rate"][1] == pytest.approx(new[1])
    _call(env, population, False)()  # Trains on at the new settings.
    np.testing.assert_allclose(population.optimizer.rates.numpy(), new)


def test_exploit_resamples_from_the_given_values_and_rewards_follow_the_new_discount():
    """pbt.resample_probability 1: the copied member's settings are given values."""
    members, lists = (
        4,
        {"learning_rate": [1e-3, 2e-3, 3e-3, 4e-3], "discount": [0.9, 0.95, 0.99, 0.9]},
    )
    config = _config(
        "pendulum_tf",
        members,
        "train.steps_per_call=16",
        "train.eval_every=64",
        "pbt.interval=64",
        "pbt.perturb=[learning_rate, discount]",
        "pbt.resample_probability=1",
        *[f"ppo.{key}={values}" for key, values in lists.items()],
    )
    env = make_in_graph_env(config.env, ENVS, SEED, members=members)
    population = PopulationPPO(env, config, seed=SEED)
    for _ in range(5):
        source = population.exploit([3.0, 1.0, 4.0, 2.0], 0.25, (0.8, 1.2))
        np.testing.assert_array_equal(source, [0, 2, 2, 3])
        for key, values in lists.items():
            new = population.pbt_settings[key].numpy()
            assert new[1] in np.float32(values), (key, new)
            np.testing.assert_array_equal(new[[0, 2, 3]], np.float32(values)[[0, 2, 3]])
    discount = population.pbt_settings["discount"].numpy()
    scaler, ones = population.reward_scaler, tf.ones([ENVS, members])
    for _ in range(2):  # The discounted return R <- discount R + 1, at the new discount.
        scaler.scale(tf.range(ENVS), ones, tf.zeros([ENVS, members], tf.bool))
    np.testing.assert_allclose(scaler.discounted_return.numpy()[0], discount + 1, rtol=1e-6)


def test_a_recurrent_member_policy_acts_as_the_member(tmp_path):
    """`member_policy(m).act_recurrent` and its SavedModel act as member m with its state."""
    config = _config("cartpole_tf", MEMBERS, "network.name=gru", *RECURRENT)
    env, population = _population(config)
    _call(env, population, False)()  # Normalizers and parameters away from their start.
    with pytest.raises(ValueError, match="needs its state"):
        population.act(tf.zeros([MEMBERS, 4]))
    rng = np.random.default_rng(0)
    observ = rng.normal(scale=3.0, size=(7, *env.observation_space.shape)).astype(np.float32)
    state = rng.normal(size=(7, population.policy.state_size)).astype(np.float32)
    tiled = [tf.constant(np.tile(x, [MEMBERS, 1])) for x in (observ, state)]
    actions, states = (x.numpy() for x in population.act_recurrent(*tiled))  # [M 7, ...]
    for member in range(MEMBERS):
        rows = slice(member * 7, (member + 1) * 7)
        policy = population.member_policy(member)
        action, new_state = policy.act_recurrent(tf.constant(observ), tf.constant(state))
        np.testing.assert_array_equal(action, actions[rows])
        np.testing.assert_allclose(new_state, states[rows], rtol=1e-5, atol=1e-6)
    path = export_policy(policy, env.observation_space, tmp_path / "member")  # The last.
    loaded = tf.saved_model.load(str(path))
    np.testing.assert_array_equal(loaded(observ, state)["action"], actions[rows])
    assert loaded.initial_state(2).shape == (2, population.policy.state_size)


def test_exploit_refuses_a_rollout_under_way():
    """Its steps were collected by the members the copies replace: not theirs to train on."""
    config = _config(
        "cartpole_tf",
        4,
        "train.steps_per_call=16",
        "train.eval_every=64",
        "pbt.interval=64",
    )
    env = make_in_graph_env(config.env, ENVS, SEED, members=4)
    population = PopulationPPO(env, config, seed=SEED)
    tf.function(lambda: simulate(env, population, steps=STEPS // 2), autograph=False)()
    with pytest.raises(ValueError, match=r"8 of ppo.rollout_length=16 steps"):
        population.exploit([3.0, 1.0, 4.0, 2.0], 0.25, (0.8, 1.2))
    tf.function(lambda: simulate(env, population, steps=STEPS // 2), autograph=False)()
    np.testing.assert_array_equal(
        population.exploit([3.0, 1.0, 4.0, 2.0], 0.25, (1.0,)), [0, 2, 2, 3]
    )


def test_a_copied_member_takes_all_its_parents_listed_settings(tmp_path):
    """Two members of different listed settings: the copy has the parent's, then trains so."""
    lists = {
        "learning_rate": [1e-3, 2e-3],
        "clip_ratio": [0.1, 0.3],
        "entropy_coef": [0.0, 0.05],
        "discount": [0.9, 0.99],
    }
    config = _config(
        "cartpole_tf",
        2,
        "train.steps_per_call=16",
        "train.eval_every=64",
        "pbt.interval=64",
        "pbt.quantile=0.5",
        "pbt.perturb=[learning_rate]",
        *[f"ppo.{key}={values}" for key, values in lists.items()],
    )
    env = make_in_graph_env(config.env, ENVS, SEED, members=2)
    population = PopulationPPO(env, config, seed=SEED)
    _call(env, population, False)()
    source = population.exploit([1.0, 2.0], 0.5, (1.2,))  # Member 0 takes member 1's.
    np.testing.assert_array_equal(source, [1, 1])
    values = population.pbt_values()
    assert values["ppo.learning_rate"] == pytest.approx([2.4e-3, 2e-3])  # Perturbed.
    for key in ("clip_ratio", "entropy_coef", "discount"):
        assert values[f"ppo.{key}"] == pytest.approx([lists[key][1]] * 2), key
    np.testing.assert_array_equal(population.policy_params[0], population.policy_params[1])
    _call(env, population, False)()  # Both members now train at member 1's settings.
    np.testing.assert_allclose(population.optimizer.rates.numpy(), [2.4e-3, 2e-3], rtol=1e-6)
    path = tf.train.Checkpoint(algo=population).write(str(tmp_path / "ckpt"))  # Held there.
    keys = dict(tf.train.list_variables(path))
    assert "algo/pbt_settings/entropy_coef/.ATTRIBUTES/VARIABLE_VALUE" in keys
