"""PPO with gSDE (ppo.gsde): when each environment draws its exploration matrix, what it
samples, the checks at load and construction, and learning on Pendulum over seeds."""

import numpy as np
import pytest
import tensorflow as tf

from batchrl import envs
from batchrl.algorithms import PPO
from batchrl.algorithms.ppo import gsde
from batchrl.config import ConfigError, load_run_config
from batchrl.runners import train
from batchrl.tools.simulate import simulate
from tests.learning import assert_k_of_n


def gsde_ppo(overrides=(), num_envs=3):
    tf.keras.utils.set_random_seed(0)
    config = load_run_config(
        "pendulum_tf",
        [
            f"env.num_envs={num_envs}",
            "ppo.gsde=true",
            "ppo.gsde_every=3",
            "ppo.rollout_length=8",
            "train.steps_per_call=8",
            "ppo.epochs=1",
            "ppo.minibatches=1",
            "network.policy_layers=[16, 5]",
            "network.value_layers=[16]",
            *overrides,
        ],
    )
    env = envs.make("Pendulum-v1", num_envs, seed=1)
    return env, PPO(env, config, seed=0)


def test_each_environment_draws_every_gsde_every_steps_and_at_each_rollout_start():
    env, algo = gsde_ppo()
    step = tf.function(lambda: simulate(env, algo, steps=1))
    drawn = []
    previous = algo._noise.numpy()  # [3, L=5, A=1], zeros before the first step.
    for t in range(20):
        step()
        noise = algo._noise.numpy()
        changed = np.any(noise != previous, axis=(1, 2))  # [3]
        assert changed.all() or not changed.any(), (t, changed)  # All environments alike.
        if changed.all():
            drawn.append(t)
        previous = noise
        # The sample that acted is the mean plus the features times the held matrix.
        np.testing.assert_allclose(
            algo._last_sample.numpy(),
            algo.head.explore(algo._last_output, algo._noise).numpy(),
            rtol=1e-5,
            atol=1e-6,
        )
    # Every 3 steps, and anew at steps 8 and 16, where rollouts of 8 start.
    assert drawn == [0, 3, 6, 8, 11, 14, 16, 19]


def test_hold_noise_by_hand():
    held = tf.fill([4, 1, 1], 7.0)
    fresh = tf.reshape(tf.range(4, dtype=tf.float32), [4, 1, 1])
    age = tf.constant([0, 1, 3, 2])  # New, held once, held `every` times, held twice.
    noise, after = gsde.hold_noise(held, fresh, age, every=3, rollout_start=False)
    np.testing.assert_array_equal(noise.numpy().ravel(), [0.0, 7.0, 2.0, 7.0])
    np.testing.assert_array_equal(after.numpy(), [1, 2, 1, 3])
    noise, after = gsde.hold_noise(held, fresh, age, every=3, rollout_start=True)
    np.testing.assert_array_equal(noise.numpy().ravel(), [0.0, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(after.numpy(), [1, 1, 1, 1])


def test_log_std_is_a_matrix_of_the_last_hidden_layer_by_the_actions():
    _, algo = gsde_ppo()
    assert algo.head.log_std.shape == (5, 1)
    # The head holds its [L, A] matrix and no state-independent [A] vector beside it.
    assert [v.shape for v in algo.head.trainable_variables] == [(5, 1)]
    assert algo.head.size == 1 + 5
    assert algo._last_output.shape == (3, 6)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["network.name=gru"], r"needs network.name='feedforward'.*got network.name='gru'"),
        (["ppo.gsde_every=0"], r"ppo.gsde_every"),
    ],
)
def test_settings_gsde_cannot_train_with_are_refused_at_load(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_run_config("pendulum_tf", ["ppo.gsde=true", *overrides])


def test_discrete_actions_are_refused_at_construction():
    config = load_run_config("cartpole_tf", ["ppo.gsde=true", "env.num_envs=2"])
    with pytest.raises(ConfigError, match=r"ppo.gsde=true explores in continuous actions.*"):
        PPO(envs.make("CartPole-v1", 2, seed=0), config)


@pytest.mark.slow  # Out of the default suite: about 40 s on 2 cores (AMD EPYC, 2026-12-06).
def test_pendulum_tf_with_gsde_solves_four_of_five_seeds_at_its_budget(tmp_path):
    """The preset (gSDE, 98,304 steps) as a population of seeds 0 to 4: each member's final
    evaluation, 64 episodes of the TensorFlow port of Pendulum-v1."""
    overrides = ["train.population=5", "train.seed=0", "env.eval_on_gymnasium=false"]
    config = load_run_config("pendulum_tf", overrides)
    assert config.ppo.gsde
    result = train(config, tmp_path, progress=lambda *_, **__: None)
    finals = {member["seed"]: member["eval_return"] for member in result["members"]}
    assert_k_of_n(finals, -200.0, 4)
