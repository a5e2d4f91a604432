"""gSDE's head (StateDependentNoiseHead) against hand-worked numbers: the state-dependent
variance z^2 sigma^2 + 1e-6, log-probabilities, entropy, the exploring sample and the
matrices' spread (Raffin et al. 2022; SB3's StateDependentNoiseDistribution)."""

import math

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from batchrl.networks import MLP, StateDependentNoiseHead, WithFeatures


def head(actions, log_std):
    """A head for `actions` dimensions in [-2, 2] and log sigma [L, A] = `log_std`."""
    space = gym.spaces.Box(-2.0, 2.0, (actions,), np.float32)
    result = StateDependentNoiseHead(space, latent_size=len(log_std))
    result.log_std.assign(np.asarray(log_std, np.float32))
    return result


def test_one_action_log_prob_entropy_and_mode_by_hand():
    # sigma = [[1], [2]], z = [0.5, -1]: variance 0.25 * 1 + 1 * 4 + 1e-6 = 4.250001.
    gsde = head(1, [[0.0], [math.log(2.0)]])
    dist = gsde(tf.constant([[0.3, 0.5, -1.0]]))  # [mean, z1, z2]
    np.testing.assert_allclose(dist.distribution.scale.numpy(), [[math.sqrt(4.250001)]], 1e-6)
    # -0.5 (1 - 0.3)^2 / 4.250001 - 0.5 ln 4.250001 - 0.5 ln(2 pi)
    np.testing.assert_allclose(dist.log_prob([[1.0]]).numpy(), [-1.7000452], rtol=1e-6)
    # 0.5 (1 + ln(2 pi)) + 0.5 ln 4.250001
    np.testing.assert_allclose(dist.entropy().numpy(), [2.1423981], rtol=1e-6)
    np.testing.assert_allclose(dist.mode().numpy(), [[0.3]])


def test_two_actions_sum_their_log_probs():
    # sigma = [[1, 0.5], [2, 1]], z = [0.5, -1]: variances 4.250001 and 0.25 * 0.25 + 1 + 1e-6.
    gsde = head(2, np.log([[1.0, 0.5], [2.0, 1.0]]))
    dist = gsde(tf.constant([[0.3, -0.1, 0.5, -1.0]]))
    np.testing.assert_allclose(
        dist.distribution.scale.numpy() ** 2, [[4.250001, 1.062501]], rtol=1e-6
    )
    np.testing.assert_allclose(dist.log_prob([[1.0, 0.0]]).numpy(), [-2.6540024], rtol=1e-6)


def test_the_exploring_sample_is_the_mean_plus_features_times_theta():
    gsde = head(1, [[0.0], [0.0]])
    output = tf.constant([[0.3, 0.5, -1.0], [0.0, 1.0, 2.0]])
    theta = tf.constant([[[0.3], [-0.2]], [[1.0], [0.5]]])  # [N=2, L=2, A=1]
    # 0.3 + 0.5 * 0.3 + (-1) * (-0.2) = 0.65; 0 + 1 * 1 + 2 * 0.5 = 2.
    np.testing.assert_allclose(gsde.explore(output, theta).numpy(), [[0.65], [2.0]], rtol=1e-6)


def test_drawn_matrices_have_the_learned_spread():
    gsde = head(2, np.log([[1.0, 0.5], [2.0, 0.1]]))
    theta = gsde.draw_noise(20000, tf.constant([1, 2])).numpy()  # [20000, 2, 2]
    assert theta.shape == (20000, 2, 2)
    np.testing.assert_allclose(theta.std(axis=0), [[1.0, 0.5], [2.0, 0.1]], rtol=0.03)
    np.testing.assert_allclose(theta.mean(axis=0), np.zeros([2, 2]), atol=0.04)


def test_the_variance_trains_sigma_but_not_the_features():
    gsde = head(1, [[0.0], [0.0]])
    output = tf.Variable([[0.3, 0.5, -1.0]])
    with tf.GradientTape() as tape:
        log_prob = gsde(output).log_prob([[1.0]])
    d_output, d_log_std = tape.gradient(log_prob, [output, gsde.log_std])
    assert d_output.numpy()[0, 0] != 0  # The mean trains.
    np.testing.assert_array_equal(d_output.numpy()[0, 1:], [0.0, 0.0])  # z(s) does not here.
    assert np.all(d_log_std.numpy() != 0)


def test_with_features_puts_the_last_hidden_layer_beside_the_output():
    mlp = MLP([8, 5], 2, "tanh")
    network = WithFeatures(mlp)
    x = tf.random.normal([3, 4])
    output = network(x)
    assert output.shape == (3, 7)
    np.testing.assert_allclose(output[:, :2].numpy(), mlp(x).numpy(), rtol=1e-6)
    np.testing.assert_allclose(output[:, 2:].numpy(), mlp.features(x).numpy(), rtol=1e-6)


def test_discrete_actions_are_refused_naming_the_space():
    with pytest.raises(ValueError, match=r"Discrete\(3\).*Box"):
        StateDependentNoiseHead(gym.spaces.Discrete(3), latent_size=4)
