"""Pure math of SAC: the squashed Gaussian, action bounds, the soft targets and the losses."""

from __future__ import annotations

import math

import tensorflow as tf
import tensorflow_probability as tfp

tfd = tfp.distributions


def normal_from_uniforms(u1: tf.Tensor, u2: tf.Tensor) -> tf.Tensor:
    """Standard normal numbers from pairs of uniform ones (Box and Muller 1958).

        z = sqrt(-2 log(1 - u1)) cos(2 pi u2)

    1 - u1 lies in (0, 1] for u1 in [0, 1), so the log is finite. The uniforms come from
    a `batchrl.replay.RandomStream`, whose bits are the same eagerly, in a graph and
    under XLA; log, sqrt and cos may still round differently under XLA (by an ulp).

    Args:
      u1, u2: float32 uniforms in [0, 1), of one shape.

    Returns:
      Standard normal numbers of that shape.
    """
    return tf.sqrt(-2.0 * tf.math.log1p(-u1)) * tf.cos((2.0 * math.pi) * u2)


def log_one_minus_tanh_square(u: tf.Tensor) -> tf.Tensor:
    """log(1 - tanh(u)^2), stable for large |u| (as TFP's Tanh bijector computes it).

        log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))

    which follows from 1 - tanh(u)^2 = 4 / (e^u + e^-u)^2.
    """
    return 2.0 * (math.log(2.0) - u - tf.nn.softplus(-2.0 * u))


def squashed_gaussian_log_prob(u: tf.Tensor, mean: tf.Tensor, log_std: tf.Tensor) -> tf.Tensor:
    """log pi(a|s) of a = tanh(u), u ~ N(mean, exp(log_std)^2) per dimension.

    Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications"
    (arXiv 1812.05905), Appendix C, "Enforcing Action Bounds":

        log pi(a|s) = sum_i [log N(u_i; mean_i, std_i) - log(1 - tanh(u_i)^2)]

    with the correction in the stable form of `log_one_minus_tanh_square`. This is the
    density of the action in [-1, 1]; scaling it to the space's bounds (`to_bounds`)
    does not enter it (Stable-Baselines3's choice; CleanRL subtracts log((high - low) / 2)
    per dimension as well).

    Args:
      u: [N, A] the pre-squash sample.
      mean: [N, A] the Gaussian's mean.
      log_std: [N, A] its log standard deviation.

    Returns:
      [N] log-probabilities.
    """
    gaussian = tfd.Normal(mean, tf.exp(log_std)).log_prob(u)  # [N, A]
    return tf.reduce_sum(gaussian - log_one_minus_tanh_square(u), axis=-1)


def to_bounds(squashed: tf.Tensor, low: tf.Tensor, high: tf.Tensor) -> tf.Tensor:
    """Maps actions in [-1, 1] to the space's [low, high]:

        action = (high + low) / 2 + a (high - low) / 2

    (= low + (a + 1) (high - low) / 2, written about the center so that symmetric bounds
    keep small actions exact in float32).
    """
    return 0.5 * (high + low) + squashed * (0.5 * (high - low))


def from_bounds(action: tf.Tensor, low: tf.Tensor, high: tf.Tensor) -> tf.Tensor:
    """Maps actions in [low, high] to [-1, 1], the inverse of `to_bounds`:

    a = (action - (high + low) / 2) / ((high - low) / 2)
    """
    return (action - 0.5 * (high + low)) / (0.5 * (high - low))


def soft_q_targets(
    reward: tf.Tensor,
    discount: tf.Tensor,
    next_q1: tf.Tensor,
    next_q2: tf.Tensor,
    next_log_prob: tf.Tensor,
    alpha: tf.Tensor,
) -> tf.Tensor:
    """Soft Bellman targets of the twin critics (Haarnoja et al. 2018, Sections 4.2 and 6:
    the soft value of the next state under the smaller of two target critics, the clipped
    double Q of Fujimoto et al. 2018).

        y = r + discount * (min(Q1', Q2')(s', a') - alpha log pi(a'|s')),  a' ~ pi(.|s')

    `discount` carries gamma^n for n-step returns (`batchrl.replay.NStep`) and is 0 where
    the window ended in a terminal state.

    Args:
      reward: [N] (n-step) returns.
      discount: [N] the discount to the bootstrap state.
      next_q1, next_q2: [N] the target critics at (s', a').
      next_log_prob: [N] log pi(a'|s').
      alpha: the temperature, a scalar.

    Returns:
      [N] targets, with no gradient.
    """
    soft_value = tf.minimum(next_q1, next_q2) - alpha * next_log_prob  # [N]
    return tf.stop_gradient(reward + discount * soft_value)


def critic_loss(q1: tf.Tensor, q2: tf.Tensor, target: tf.Tensor) -> tf.Tensor:
    """The twin critics' loss: Haarnoja et al. 2018's J_Q (Section 4.2), 0.5 times the
    squared error, for each critic, summed (Stable-Baselines3's form):

        J_Q = 0.5 * mean((Q1(s, a) - y)^2) + 0.5 * mean((Q2(s, a) - y)^2)

    Args:
      q1, q2: [N] the critics at the replayed (s, a).
      target: [N] y, from `soft_q_targets`.

    Returns:
      A scalar.
    """
    return 0.5 * (tf.reduce_mean(tf.square(q1 - target)) + tf.reduce_mean(tf.square(q2 - target)))


def actor_loss(log_prob: tf.Tensor, q1: tf.Tensor, q2: tf.Tensor, alpha: tf.Tensor) -> tf.Tensor:
    """The policy's loss (Haarnoja et al. 2018, J_pi of Section 4.2, reparameterized, with
    the smaller of the two critics):

        J_pi = mean(alpha log pi(a|s) - min(Q1, Q2)(s, a)),  a = tanh(mean + std * z)

    Args:
      log_prob: [N] log pi(a|s) of reparameterized actions a.
      q1, q2: [N] the critics at (s, a).
      alpha: the temperature, a scalar (no gradient reaches it here).

    Returns:
      A scalar.
    """
    return tf.reduce_mean(tf.stop_gradient(alpha) * log_prob - tf.minimum(q1, q2))


def temperature_loss(log_alpha: tf.Tensor, log_prob: tf.Tensor, target_entropy: float) -> tf.Tensor:
    """The temperature's loss (Haarnoja et al. 2018, Section 5, eq. 18), of log alpha:

        J(alpha) = -mean(log_alpha * (log pi(a|s) + target_entropy))

    Its gradient lowers alpha while the policy's entropy -log pi is above the target and
    raises it below. Learning log alpha rather than alpha keeps alpha positive
    (Stable-Baselines3 and softlearning do the same).

    Args:
      log_alpha: the scalar variable (or tensor) learned.
      log_prob: [N] log pi(a|s) of actions sampled at replayed states; no gradient.
      target_entropy: the entropy aimed at, e.g. -|A|.

    Returns:
      A scalar.
    """
    return -tf.reduce_mean(log_alpha * tf.stop_gradient(log_prob + target_entropy))


def smoothed_target_actions(
    next_action: tf.Tensor, noise: tf.Tensor, noise_clip: float
) -> tf.Tensor:
    """TD3's target policy smoothing: the target actor's actions with clipped noise.

    Fujimoto, van Hoof, Meger 2018, "Addressing Function Approximation Error in
    Actor-Critic Methods" (TD3), eq. (15), in [-1, 1] action units:

        a' = clip(pi'(s') + clip(noise, -c, c), -1, 1),    noise ~ N(0, sigma~^2).

    Args:
      next_action: [N, A], pi'(s') in [-1, 1].
      noise: [N, A], already scaled by sigma~.
      noise_clip: c.

    Returns:
      [N, A], a' in [-1, 1].
    """
    clipped = tf.clip_by_value(noise, -noise_clip, noise_clip)
    return tf.clip_by_value(next_action + clipped, -1.0, 1.0)


def clipped_double_q_targets(
    reward: tf.Tensor, discount: tf.Tensor, next_q1: tf.Tensor, next_q2: tf.Tensor
) -> tf.Tensor:
    """TD3's clipped double-Q targets, y = r + discount * min(Q1'(s', a'), Q2'(s', a')).

    Fujimoto et al. 2018, eq. (10) (Algorithm 1); `discount` is gamma^n, 0 past a terminal
    state, as in `soft_q_targets`. All [N]; no gradient flows into the target.
    """
    return tf.stop_gradient(reward + discount * tf.minimum(next_q1, next_q2))
