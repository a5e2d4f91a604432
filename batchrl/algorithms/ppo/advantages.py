"""PPO's advantages and returns as pure functions: GAE, lambda-returns, discounted returns,
their normalization and the value function's explained variance."""

from __future__ import annotations

import tensorflow as tf


def masked_mean(x: tf.Tensor, mask: tf.Tensor | None = None, axis=None) -> tf.Tensor:
    """Mean of `x` over the entries where `mask` is set.

        masked_mean(x, m) = sum_i m_i x_i / sum_i m_i

    Padded entries are selected away rather than multiplied by zero, so a NaN or an
    infinity in a padded step does not leak into the result. An all-zero mask gives 0.

    Args:
      x: Values of any shape, for example [T, B].
      mask: Bool or {0, 1} values broadcastable to the shape of `x`; None means all
        entries count.
      axis: the axis to average over (e.g. -1: each member's mean of [M, n]); None:
        all of them.

    Returns:
      A scalar of the dtype of `x`, or `x` without `axis`.
    """
    x = tf.convert_to_tensor(x)
    if mask is None:
        return tf.reduce_mean(x, axis)
    mask = tf.broadcast_to(tf.cast(mask, tf.bool), tf.shape(x))
    total = tf.reduce_sum(tf.where(mask, x, tf.zeros_like(x)), axis)
    count = tf.reduce_sum(tf.cast(mask, x.dtype), axis)
    return tf.math.divide_no_nan(total, count)


def normalize_advantage(advantage: tf.Tensor, mask: tf.Tensor | None = None) -> tf.Tensor:
    """Advantages standardized over the entries where `mask` is set.

        A' = (A - mean(A)) / (std(A) + 1e-8)

    with the population standard deviation, as OpenAI baselines' ppo2 and SB3 do (an
    implementation detail, not in Schulman et al. 2017).

    Args:
      advantage: [T, B] advantages.
      mask: Optional [T, B] bool; entries that count.

    Returns:
      The standardized advantages [T, B].
    """
    mean = masked_mean(advantage, mask)
    std = tf.sqrt(masked_mean(tf.square(advantage - mean), mask))
    return (advantage - mean) / (std + 1e-8)


def _reverse_discounted_cumsum(x: tf.Tensor, factor: tf.Tensor) -> tf.Tensor:
    """y_t = x_t + factor_t * y_{t+1} with y_T = 0, along the leading time axis.

    Args:
      x: [T, B] values.
      factor: [T, B] per-step discount applied to the next step's result.

    Returns:
      [T, B] accumulated values.
    """
    return tf.scan(
        lambda carry, elem: elem[0] + elem[1] * carry,
        (x, factor),
        initializer=tf.zeros_like(x[0]),  # [B]
        reverse=True,
    )


def gae(
    reward: tf.Tensor,
    value: tf.Tensor,
    next_value: tf.Tensor,
    terminated: tf.Tensor,
    truncated: tf.Tensor,
    discount: float | tf.Tensor,
    lambda_: float | tf.Tensor,
) -> tf.Tensor:
    """Generalized advantage estimation over a time-major rollout.

    From "High-Dimensional Continuous Control Using Generalized Advantage Estimation"
    (Schulman et al., 2016, https://arxiv.org/abs/1506.02438):

        delta_t = r_t + discount * (1 - terminated_t) * V(s_{t+1}) - V(s_t)
        A_t = delta_t + discount * lambda_ * (1 - done_t) * A_{t+1}
        done_t = terminated_t or truncated_t,   A_{T-1} = delta_{T-1}

    Gymnasium semantics: `next_value[t]` is the value of the observation that step t
    returned. A terminated step has no value beyond it. A truncated step bootstraps from
    the value of its final observation but does not carry the advantage of the next
    episode back across the boundary. The last step of the rollout bootstraps from
    `next_value[T-1]` whether or not an episode ended there.

    The result is a learning target, so no gradient flows through it.

    Args:
      reward: [T, B] rewards r_t.
      value: [T, B] values V(s_t) of the observations the actions were chosen for.
      next_value: [T, B] values V(s_{t+1}) of the observations each step returned.
      terminated: [T, B] bool, step t reached a terminal state.
      truncated: [T, B] bool, the episode was cut short after step t.
      discount: Scalar or [T, B] discount factor.
      lambda_: Scalar or [T, B] GAE parameter; 0 gives one-step TD errors, 1 gives
        Monte-Carlo returns minus the value.

    Returns:
      [T, B] advantages A_t.
    """
    reward = tf.convert_to_tensor(reward)
    dtype = reward.dtype
    value = tf.cast(value, dtype)  # [T, B]
    next_value = tf.cast(next_value, dtype)  # [T, B]
    terminated = tf.cast(terminated, tf.bool)  # [T, B]
    done = tf.logical_or(terminated, tf.cast(truncated, tf.bool))  # [T, B]
    discount = tf.cast(discount, dtype)
    lambda_ = tf.cast(lambda_, dtype)
    not_terminated = 1.0 - tf.cast(terminated, dtype)  # [T, B]
    not_done = 1.0 - tf.cast(done, dtype)  # [T, B]
    delta = reward + discount * not_terminated * next_value - value  # [T, B]
    factor = tf.broadcast_to(discount * lambda_ * not_done, tf.shape(delta))  # [T, B]
    advantage = _reverse_discounted_cumsum(delta, factor)  # [T, B]
    return tf.stop_gradient(advantage)


def lambda_returns(
    reward: tf.Tensor,
    value: tf.Tensor,
    next_value: tf.Tensor,
    terminated: tf.Tensor,
    truncated: tf.Tensor,
    discount: float | tf.Tensor,
    lambda_: float | tf.Tensor,
) -> tf.Tensor:
    """TD(lambda) returns, the value targets that match `gae`.

        G^lambda_t = A_t + V(s_t)

    with A_t from `gae` (Schulman et al., 2016), which takes the same arguments.

    Args:
      reward: [T, B] rewards.
      value: [T, B] values of the observations the actions were chosen for.
      next_value: [T, B] values of the observations each step returned.
      terminated: [T, B] bool.
      truncated: [T, B] bool.
      discount: Scalar or [T, B] discount factor.
      lambda_: Scalar or [T, B] TD(lambda) parameter.

    Returns:
      [T, B] returns, without gradient.
    """
    advantage = gae(reward, value, next_value, terminated, truncated, discount, lambda_)
    return advantage + tf.stop_gradient(tf.cast(value, advantage.dtype))  # [T, B]


def discounted_return(
    reward: tf.Tensor,
    next_value: tf.Tensor,
    terminated: tf.Tensor,
    truncated: tf.Tensor,
    discount: float | tf.Tensor,
) -> tf.Tensor:
    """Discounted Monte-Carlo returns, bootstrapped where an episode was cut off.

        G_t = r_t + discount * (1 - terminated_t) * V(s_{t+1})   if done_t or t = T-1
        G_t = r_t + discount * G_{t+1}                           otherwise

    BatchPPO (Hafner et al., 2017, https://arxiv.org/abs/1709.02878) trains its value
    function on these returns over whole episodes; here a truncated step and the
    last step of the rollout bootstrap from `next_value`. With `next_value[t]` equal
    to `value[t+1]` inside episodes this is `lambda_returns` with lambda_ = 1.

    Args:
      reward: [T, B] rewards.
      next_value: [T, B] values of the observations each step returned; only read at
        truncated steps and at the last step.
      terminated: [T, B] bool.
      truncated: [T, B] bool.
      discount: Scalar or [T, B] discount factor.

    Returns:
      [T, B] returns, without gradient.
    """
    reward = tf.convert_to_tensor(reward)
    dtype = reward.dtype
    next_value = tf.cast(next_value, dtype)  # [T, B]
    terminated = tf.cast(terminated, tf.bool)  # [T, B]
    done = tf.logical_or(terminated, tf.cast(truncated, tf.bool))  # [T, B]
    last = tf.range(tf.shape(reward)[0]) == tf.shape(reward)[0] - 1  # [T]
    stop = tf.logical_or(done, last[:, None])  # [T, B]
    discount = tf.cast(discount, dtype)
    bootstrap = tf.where(stop & ~terminated, next_value, tf.zeros_like(next_value))  # [T, B]
    x = reward + discount * bootstrap  # [T, B]
    factor = tf.broadcast_to(discount * (1.0 - tf.cast(stop, dtype)), tf.shape(x))  # [T, B]
    return tf.stop_gradient(_reverse_discounted_cumsum(x, factor))


def explained_variance(
    prediction: tf.Tensor,
    target: tf.Tensor,
    mask: tf.Tensor | None = None,
) -> tf.Tensor:
    """Fraction of the variance of `target` that `prediction` explains.

        ev = 1 - Var[target - prediction] / Var[target]

    1 is a perfect prediction, 0 is no better than predicting the mean, and negative
    values are worse than that. When Var[target] is 0 the ratio is undefined; this
    returns 0 rather than NaN (OpenAI baselines returns NaN), so that summaries and
    numeric checks stay finite.

    Args:
      prediction: [T, B] predictions, for example values.
      target: [T, B] targets, for example returns.
      mask: Optional [T, B] bool or {0, 1}; zero marks padded steps to ignore.

    Returns:
      Scalar explained variance.
    """
    prediction = tf.convert_to_tensor(prediction)
    target = tf.cast(target, prediction.dtype)

    def variance(x):
        return masked_mean(tf.square(x - masked_mean(x, mask)), mask)

    var_target = variance(target)
    var_residual = variance(target - prediction)
    return tf.where(
        var_target > 0,
        1.0 - tf.math.divide_no_nan(var_residual, var_target),
        tf.zeros_like(var_target),
    )
