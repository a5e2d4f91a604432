"""Golden-number tests of the SAC math against NumPy, each run eagerly, in tf.function and
under XLA."""

import math

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

from batchrl.algorithms.sac import losses, squashed_gaussian, targets
from batchrl.replay import RandomStream

MODES = ["eager", "function", "xla"]


def compile_fn(fn, mode):
    if mode == "eager":
        return fn
    return tf.function(fn, jit_compile=(mode == "xla"))


def numpy_log_prob(u, mean, std):
    """log N(u; mean, std) - log(1 - tanh(u)^2), summed over the last axis, in float64.

    log(1 - tanh(u)^2) = log(sech(u)^2) = -2 log cosh(u), written so that it stays exact
    where 1 - tanh(u)^2 rounds to 0.
    """
    u, mean, std = (np.asarray(x, np.float64) for x in (u, mean, std))
    gaussian = -0.5 * ((u - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)
    log_cosh = np.abs(u) + np.log1p(np.exp(-2 * np.abs(u))) - np.log(2.0)
    return np.sum(gaussian + 2 * log_cosh, axis=-1)


@pytest.mark.parametrize("mode", MODES)
def test_squashed_log_prob_is_the_gaussian_minus_the_tanh_correction(mode):
    u = np.array([[0.0, 0.5], [-1.2, 2.0], [3.0, -0.3]], np.float32)  # [N, A]
    mean = np.array([[0.1, -0.2], [0.0, 1.5], [2.0, 0.0]], np.float32)
    log_std = np.array([[0.0, -1.0], [0.5, -0.5], [-2.0, 1.0]], np.float32)
    log_prob = compile_fn(squashed_gaussian.squashed_gaussian_log_prob, mode)(u, mean, log_std)
    np.testing.assert_allclose(log_prob, numpy_log_prob(u, mean, np.exp(log_std)), rtol=1e-5)
    # Row 0 by hand: log N(0; 0.1, 1) + log N(0.5; -0.2, e^-1) - log(1 - tanh(0.5)^2), the
    # correction 0 for u = 0.
    by_hand = (
        -0.5 * 0.1**2
        - 0.5 * math.log(2 * math.pi)
        - 0.5 * (0.7 / math.exp(-1)) ** 2
        + 1.0
        - 0.5 * math.log(2 * math.pi)
        - math.log(1 - math.tanh(0.5) ** 2)
    )
    assert float(log_prob[0]) == pytest.approx(by_hand, rel=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_the_tanh_correction_stays_finite_where_one_minus_tanh_squared_rounds_to_zero(mode):
    u = tf.constant([[-20.0], [20.0], [40.0]])
    naive = tf.math.log(1.0 - tf.tanh(u) ** 2)  # float32 tanh(20) is 1: -inf
    assert np.all(np.isneginf(naive.numpy()))
    correction = compile_fn(squashed_gaussian.log_one_minus_tanh_square, mode)(u)
    # -2 log cosh(u) = 2 (log 2 - |u| - log1p(e^(-2|u|))): -38.6137, -38.6137, -78.6137.
    np.testing.assert_allclose(correction[:, 0], 2 * (math.log(2) - np.array([20, 20, 40])))


def test_squashed_log_prob_matches_tfp_tanh_transformed_normal():
    mean = tf.constant([[0.3, -1.0, 0.0]])
    log_std = tf.constant([[-0.5, 0.2, 1.0]])
    u = tf.constant([[0.1, -2.0, 1.5]])
    squashed = tfp.distributions.TransformedDistribution(
        tfp.distributions.Normal(mean, tf.exp(log_std)), tfp.bijectors.Tanh()
    )
    expected = tf.reduce_sum(squashed.log_prob(tf.tanh(u)), axis=-1)
    actual = squashed_gaussian.squashed_gaussian_log_prob(u, mean, log_std)
    np.testing.assert_allclose(actual, expected, rtol=1e-4)


@pytest.mark.parametrize("mode", MODES)
def test_actions_map_between_minus_one_one_and_the_bounds(mode):
    low, high = tf.constant([-2.0, 0.0]), tf.constant([2.0, 10.0])
    squashed = tf.constant([[-1.0, -1.0], [0.0, 0.0], [0.5, 1.0]])
    # low + (a + 1) (high - low) / 2: (-2, 0), (0, 5), (1, 10).
    action = compile_fn(squashed_gaussian.to_bounds, mode)(squashed, low, high)
    np.testing.assert_allclose(action, [[-2.0, 0.0], [0.0, 5.0], [1.0, 10.0]])
    np.testing.assert_allclose(
        compile_fn(squashed_gaussian.from_bounds, mode)(action, low, high), squashed
    )


@pytest.mark.parametrize("mode", MODES)
def test_soft_targets_take_the_smaller_critic_minus_alpha_log_pi_and_stop_at_terminals(mode):
    reward = tf.constant([1.0, -0.5, 2.0])
    discount = tf.constant([0.99, 0.0, 0.9801])  # Row 1 ended in a terminal state; row 2 n=2.
    next_q1 = tf.constant([10.0, 7.0, -3.0])
    next_q2 = tf.constant([12.0, 1.0, -4.0])
    next_log_prob = tf.constant([-1.0, 3.0, 0.5])
    alpha = tf.constant(0.2)
    # 1 + 0.99 (10 + 0.2) = 11.098; -0.5 + 0 = -0.5; 2 + 0.9801 (-4 - 0.1) = -2.01841.
    y = compile_fn(targets.soft_q_targets, mode)(
        reward, discount, next_q1, next_q2, next_log_prob, alpha
    )
    np.testing.assert_allclose(y, [11.098, -0.5, -2.01841], rtol=1e-6)


def test_soft_targets_pass_no_gradient():
    q = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as tape:
        y = targets.soft_q_targets(tf.ones(2), tf.ones(2), q, q, tf.zeros(2), 0.1)
    assert tape.gradient(y, q) is None


@pytest.mark.parametrize("mode", MODES)
def test_critic_loss_is_half_the_mean_squared_error_of_each_critic_summed(mode):
    q1, q2 = tf.constant([1.0, 2.0, 3.0]), tf.constant([0.0, 2.0, 5.0])
    target = tf.constant([2.0, 2.0, 2.0])
    # 0.5 * (1 + 0 + 1) / 3 + 0.5 * (4 + 0 + 9) / 3 = 1/3 + 13/6 = 2.5
    loss = compile_fn(losses.critic_loss, mode)(q1, q2, target)
    assert float(loss) == pytest.approx(2.5, rel=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_actor_loss_is_alpha_log_pi_minus_the_smaller_critic(mode):
    log_prob = tf.constant([-1.0, 0.5])
    q1, q2 = tf.constant([3.0, -2.0]), tf.constant([4.0, -6.0])
    # mean(0.5 * -1 - 3, 0.5 * 0.5 + 6) = mean(-3.5, 6.25) = 1.375
    loss = compile_fn(losses.actor_loss, mode)(log_prob, q1, q2, tf.constant(0.5))
    assert float(loss) == pytest.approx(1.375, rel=1e-6)


def test_actor_loss_sends_no_gradient_to_alpha():
    alpha = tf.Variable(0.5)
    with tf.GradientTape() as tape:
        loss = losses.actor_loss(tf.constant([-1.0]), tf.constant([1.0]), tf.constant([2.0]), alpha)
    assert tape.gradient(loss, alpha) is None


@pytest.mark.parametrize("mode", MODES)
def test_temperature_loss_lowers_alpha_while_the_entropy_is_above_its_target(mode):
    log_alpha = tf.Variable(math.log(0.5))
    log_prob = tf.constant([-3.0, -1.0])  # Entropy estimate 2, target -1: too random.

    def loss_and_gradient(log_alpha_value, log_prob):
        with tf.GradientTape() as tape:
            tape.watch(log_alpha_value)
            loss = losses.temperature_loss(log_alpha_value, log_prob, -1.0)
        return loss, tape.gradient(loss, log_alpha_value)

    # -mean(log_alpha * (log_prob - 1)) = -log(0.5) * mean(-4, -2) = 3 log(0.5); gradient 3.
    loss, gradient = compile_fn(loss_and_gradient, mode)(tf.identity(log_alpha), log_prob)
    assert float(loss) == pytest.approx(3 * math.log(0.5), rel=1e-6)
    assert float(gradient) == pytest.approx(3.0, rel=1e-6)  # Descent lowers log alpha.


@pytest.mark.parametrize("mode", MODES)
def test_box_muller_maps_known_uniforms_to_known_normals(mode):
    u1 = tf.constant([0.0, 1.0 - math.exp(-0.5), 1.0 - math.exp(-0.5), 1.0 - math.exp(-2.0)])
    u2 = tf.constant([0.3, 0.0, 0.5, 0.25])
    # sqrt(-2 log(1 - u1)): 0, 1, 1, 2; cos(2 pi u2): -, 1, -1, 0.
    z = compile_fn(squashed_gaussian.normal_from_uniforms, mode)(u1, u2)
    np.testing.assert_allclose(z, [0.0, 1.0, -1.0, 0.0], atol=1e-6)


def test_box_muller_of_a_random_stream_is_standard_normal_and_the_same_under_xla():
    stream = RandomStream(7)

    def draw():
        uniform = stream.uniform([2, 100000])
        return squashed_gaussian.normal_from_uniforms(uniform[0], uniform[1])

    graph = tf.function(draw)().numpy()
    stream.draws.assign(0)
    xla = tf.function(draw, jit_compile=True)().numpy()
    # 100,000 draws: the standard errors of the mean and the std are 0.0032 and 0.0022.
    assert abs(graph.mean()) < 0.015 and abs(graph.std() - 1) < 0.01
    assert np.isfinite(graph).all()
    np.testing.assert_allclose(graph, xla, rtol=1e-5, atol=1e-5)


def test_uint8_observations_reach_the_networks_scaled_to_zero_one():
    from batchrl.algorithms.sac.networks import flat

    frames = np.array([[[0, 51], [255, 102]]], np.uint8)  # [N=1, 2, 2]
    np.testing.assert_allclose(flat(frames).numpy(), [[0.0, 0.2, 1.0, 0.4]], rtol=1e-6)
    floats = np.array([[[0.5, 3.0]]], np.float32)  # Vectors are only reshaped.
    np.testing.assert_allclose(flat(floats).numpy(), [[0.5, 3.0]])
