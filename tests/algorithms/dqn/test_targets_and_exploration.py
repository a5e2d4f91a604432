"""Golden-number tests of the DQN math, each run eagerly, in tf.function and under XLA."""

import numpy as np
import pytest
import tensorflow as tf

from batchrl.algorithms.dqn import exploration, networks, targets

MODES = ["eager", "function", "xla"]


def compile_fn(fn, mode):
    if mode == "eager":
        return fn
    return tf.function(fn, jit_compile=(mode == "xla"))


@pytest.mark.parametrize("mode", MODES)
def test_dueling_subtracts_the_mean_advantage(mode):
    value = tf.constant([[1.0], [-2.0]])
    advantage = tf.constant([[1.0, 2.0, 3.0], [0.0, 0.0, 6.0]])
    # Row 0: mean 2, Q = 1 + (1, 2, 3) - 2 = (0, 1, 2); row 1: mean 2, Q = -2 + (-2, -2, 4).
    q = compile_fn(networks.dueling, mode)(value, advantage)
    np.testing.assert_allclose(q, [[0.0, 1.0, 2.0], [-4.0, -4.0, 2.0]])


@pytest.mark.parametrize("mode", MODES)
def test_double_q_targets_choose_online_and_value_with_target(mode):
    reward = tf.constant([1.0, 0.5, 2.0])
    discount = tf.constant([0.9, 0.0, 0.81])  # Row 1 ended in a terminal state; row 2 n=2.
    online = tf.constant([[1.0, 3.0], [5.0, 0.0], [0.0, -1.0]])  # argmax: 1, 0, 0
    target = tf.constant([[10.0, 20.0], [7.0, 8.0], [4.0, 100.0]])
    # 1 + 0.9 * 20 = 19; 0.5 + 0 * 7 = 0.5; 2 + 0.81 * 4 = 5.24 (not 100: online chose 0).
    y = compile_fn(targets.double_q_targets, mode)(reward, discount, online, target)
    np.testing.assert_allclose(y, [19.0, 0.5, 5.24], rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_q_targets_take_the_target_max(mode):
    y = compile_fn(targets.q_targets, mode)(
        tf.constant([1.0, 2.0]), tf.constant([0.5, 0.0]), tf.constant([[4.0, 100.0], [1.0, 9.0]])
    )
    np.testing.assert_allclose(y, [51.0, 2.0])


@pytest.mark.parametrize("mode", MODES)
def test_huber_is_quadratic_inside_delta_and_linear_outside(mode):
    error = tf.constant([0.0, 0.5, -1.0, 3.0, -2.5])
    # delta 1: 0, 0.125, 0.5, 1 * (3 - 0.5) = 2.5, 2.0
    np.testing.assert_allclose(
        compile_fn(targets.huber, mode)(error), [0.0, 0.125, 0.5, 2.5, 2.0], rtol=1e-6
    )
    # delta 2: 0, 0.125, 0.5, 2 * (3 - 1) = 4, 2 * (2.5 - 1) = 3
    np.testing.assert_allclose(
        compile_fn(lambda e: targets.huber(e, 2.0), mode)(error), [0, 0.125, 0.5, 4.0, 3.0]
    )


def test_huber_matches_keras():
    error = tf.random.stateless_normal([64], seed=[1, 2]) * 3
    keras = tf.keras.losses.Huber(delta=1.5, reduction="none")(error[:, None], tf.zeros([64, 1]))
    np.testing.assert_allclose(targets.huber(error, 1.5), keras, rtol=1e-5, atol=1e-6)


def test_linear_epsilon_falls_over_the_fraction_then_stays():
    # 1,000 steps, fraction 0.1: from 1.0 at 0 to 0.05 at 100, then 0.05.
    values = [float(exploration.linear_epsilon(t, 1000, 0.1, 1.0, 0.05)) for t in (0, 50, 100, 900)]
    np.testing.assert_allclose(values, [1.0, 0.525, 0.05, 0.05], rtol=1e-6)
    assert float(exploration.linear_epsilon(10, 1000, 0.0, 1.0, 0.05)) == pytest.approx(0.05)
