"""IMPALA's losses (Espeholt et al. 2018, section 4): policy gradient, baseline, entropy."""

from __future__ import annotations

import tensorflow as tf


def policy_gradient_loss(log_prob: tf.Tensor, pg_advantages: tf.Tensor) -> tf.Tensor:
    """The V-trace actor loss, averaged over time and batch.

    Espeholt et al., 2018, Section 4.2: the policy parameters move in the direction of

        rho_s grad log pi(a_s|x_s) (r_s + gamma v_{s+1} - V(x_s)),

    whose rho-weighted advantage `vtrace.from_importance_weights` returns as
    `pg_advantages`. Minimizing

        L_pg = -mean_{t,b} log pi(a_t|x_t) * stop_gradient(A_t)

    follows that direction.

    Args:
      log_prob: [T, B] log pi(a_t|x_t) of the target policy, differentiable.
      pg_advantages: [T, B] A_t; treated as constants.

    Returns:
      The scalar loss.
    """
    return -tf.reduce_mean(log_prob * tf.stop_gradient(pg_advantages))


def baseline_loss(vs: tf.Tensor, values: tf.Tensor) -> tf.Tensor:
    """Half the mean squared error of the values against the V-trace targets.

    Espeholt et al., 2018, Section 4.2: the value parameters move in the direction of
    (v_s - V(x_s)) grad V(x_s), which is the gradient of

        L_baseline = 0.5 * mean_{t,b} (stop_gradient(v_t) - V(x_t))^2.

    The learner scales it by `baseline_cost` (0.5 in the paper).

    Args:
      vs: [T, B] V-trace targets v_t; treated as constants.
      values: [T, B] V(x_t), differentiable.

    Returns:
      The scalar loss.
    """
    return 0.5 * tf.reduce_mean(tf.square(tf.stop_gradient(vs) - values))


def entropy_loss(entropy: tf.Tensor) -> tf.Tensor:
    """The negative mean entropy of the target policy; minimizing it explores.

    Espeholt et al., 2018, Section 4.2 (as in A3C, Mnih et al., 2016):

        L_entropy = -mean_{t,b} H(pi(.|x_t)),  H(pi(.|x)) = -sum_a pi(a|x) log pi(a|x)

    for discrete actions; a Gaussian policy uses its differential entropy. The learner
    scales it by `entropy_cost`.

    Args:
      entropy: [T, B] H(pi(.|x_t)), differentiable.

    Returns:
      The scalar loss.
    """
    return -tf.reduce_mean(entropy)
