"""V-trace off-policy value targets and policy-gradient advantages (Espeholt et al., 2018)."""

from __future__ import annotations

import collections

import tensorflow as tf
import tensorflow_probability as tfp

VTraceReturns = collections.namedtuple("VTraceReturns", ["vs", "pg_advantages"])


def from_importance_weights(
    log_rhos: tf.Tensor,
    discounts: tf.Tensor,
    rewards: tf.Tensor,
    values: tf.Tensor,
    bootstrap_value: tf.Tensor,
    clip_rho_threshold: float | tf.Tensor | None = 1.0,
    clip_pg_rho_threshold: float | tf.Tensor | None = 1.0,
    lambda_: float | tf.Tensor = 1.0,
) -> VTraceReturns:
    r"""V-trace targets and policy-gradient advantages from log importance weights.

    Espeholt et al., 2018, "IMPALA: Scalable Distributed Deep-RL with Importance
    Weighted Actor-Learner Architectures" (https://arxiv.org/abs/1802.01561), Section 4.
    For a trajectory (x_t, a_t, r_t) of the behaviour policy mu, the n-step V-trace
    target of V(x_s) under the target policy pi is

        v_s = V(x_s) + sum_{t=s}^{s+n-1} gamma^{t-s} (prod_{i=s}^{t-1} c_i) delta_t V,
        delta_t V = rho_t (r_t + gamma V(x_{t+1}) - V(x_t)),
        rho_t = min(rho_bar, pi(a_t|x_t) / mu(a_t|x_t)),
        c_i = lambda min(c_bar, pi(a_i|x_i) / mu(a_i|x_i)),

    with c_bar = 1 and rho_bar = `clip_rho_threshold`. Here the window runs to the end
    of the unroll (s + n = T), V(x_T) = `bootstrap_value`, and gamma is the per-step
    `discounts[t]`, so gamma^{t-s} becomes prod_{k=s}^{t-1} discounts[k] (a zero
    discount ends the episode). The sum obeys the backward recursion (Remark 1)

        v_s - V(x_s) = delta_s V + gamma_s c_s (v_{s+1} - V(x_{s+1})),

    which is what is computed, with a reversed `tf.scan` over time. The policy-gradient
    advantage (Section 4.2) is

        A_s = rho_pg_s (r_s + gamma_s v_{s+1} - V(x_s)),  v_T = V(x_T),
        rho_pg_s = min(rho_pg_bar, pi(a_s|x_s) / mu(a_s|x_s)),

    with rho_pg_bar = `clip_pg_rho_threshold`. The paper uses rho_bar for both; a
    separate threshold follows the authors' released implementation. The factor lambda
    in [0, 1] is the Retrace-style variant the paper mentions in Section 4.1.

    Both outputs are targets: no gradient flows through them.

    Args:
      log_rhos: [T, B, ...] log pi(a_t|x_t) - log mu(a_t|x_t).
      discounts: [T, B, ...] gamma_t, the discount from step t to t + 1; 0 at a terminal.
      rewards: [T, B, ...] r_t.
      values: [T, B, ...] V(x_t) of the target policy's value function.
      bootstrap_value: [B, ...] V(x_T).
      clip_rho_threshold: rho_bar, clips the importance weights of the TD errors; None
        for no clipping.
      clip_pg_rho_threshold: rho_pg_bar, clips the importance weights of the
        policy-gradient advantages; None for no clipping.
      lambda_: lambda, scales the trace coefficients c_i.

    Returns:
      A `VTraceReturns` of `vs` [T, B, ...], the targets v_s, and `pg_advantages`
      [T, B, ...], the advantages A_s; both with stopped gradients.

    Raises:
      ValueError: if a static rank is unknown or inconsistent: `values` must have
        rank >= 2, `log_rhos`, `discounts` and `rewards` the rank of `values`, and
        `bootstrap_value` one less; or if static shapes do not match.
    """
    log_rhos = tf.convert_to_tensor(log_rhos)
    dtype = log_rhos.dtype
    discounts = tf.convert_to_tensor(discounts, dtype)
    rewards = tf.convert_to_tensor(rewards, dtype)
    values = tf.convert_to_tensor(values, dtype)
    bootstrap_value = tf.convert_to_tensor(bootstrap_value, dtype)
    _check_shapes(log_rhos, discounts, rewards, values, bootstrap_value)

    rhos = tf.exp(log_rhos)  # [T, B, ...]
    clipped_rhos = _clip(rhos, clip_rho_threshold)  # [T, B, ...]
    cs = tf.cast(lambda_, dtype) * tf.minimum(tf.ones([], dtype), rhos)  # [T, B, ...]
    next_values = tf.concat([values[1:], bootstrap_value[None]], axis=0)  # [T, B, ...]
    deltas = clipped_rhos * (rewards + discounts * next_values - values)  # [T, B, ...]

    def backward(acc, elems):
        discount, c, delta = elems  # [B, ...] each
        return delta + discount * c * acc  # [B, ...]

    vs_minus_values = tf.scan(
        backward,
        (discounts, cs, deltas),
        initializer=tf.zeros_like(bootstrap_value),
        reverse=True,
    )  # [T, B, ...]
    vs = vs_minus_values + values  # [T, B, ...]

    next_vs = tf.concat([vs[1:], bootstrap_value[None]], axis=0)  # [T, B, ...]
    clipped_pg_rhos = _clip(rhos, clip_pg_rho_threshold)  # [T, B, ...]
    pg_advantages = clipped_pg_rhos * (rewards + discounts * next_vs - values)  # [T, B, ...]
    return VTraceReturns(vs=tf.stop_gradient(vs), pg_advantages=tf.stop_gradient(pg_advantages))


def log_rhos_from_logits(
    behaviour_logits: tf.Tensor, target_logits: tf.Tensor, actions: tf.Tensor
) -> tf.Tensor:
    """Log importance weights log pi(a|x) - log mu(a|x) of categorical policies.

    Args:
      behaviour_logits: [T, B, ..., A] unnormalized log-probabilities of mu.
      target_logits: [T, B, ..., A] unnormalized log-probabilities of pi.
      actions: [T, B, ...] integer actions in [0, A).

    Returns:
      [T, B, ...] log_rhos; differentiable with respect to both logits.

    Raises:
      ValueError: if the logits differ in static rank or `actions` is not one rank lower.
    """
    behaviour_logits = tf.convert_to_tensor(behaviour_logits)
    target_logits = tf.convert_to_tensor(target_logits, behaviour_logits.dtype)
    actions = tf.convert_to_tensor(actions)
    rank = _rank(behaviour_logits, "behaviour_logits")
    _require_rank(target_logits, "target_logits", rank)
    _require_rank(actions, "actions", rank - 1)
    behaviour = tfp.distributions.Categorical(logits=behaviour_logits)
    target = tfp.distributions.Categorical(logits=target_logits)
    return log_rhos_from_distributions(behaviour, target, actions)  # [T, B, ...]


def log_rhos_from_distributions(
    behaviour_dist: tfp.distributions.Distribution,
    target_dist: tfp.distributions.Distribution,
    actions: tf.Tensor,
) -> tf.Tensor:
    """Log importance weights log pi(a|x) - log mu(a|x) of any tfp distributions.

    For continuous actions wrap the per-dimension distribution so that its batch shape
    is [T, B], for example `tfp.distributions.Independent(Normal(mean, std), 1)`.

    Args:
      behaviour_dist: mu, with batch shape [T, B, ...].
      target_dist: pi, with the batch and event shapes of `behaviour_dist`.
      actions: [T, B, ..., *event_shape] actions taken by mu.

    Returns:
      [T, B, ...] log_rhos; differentiable with respect to the distributions' parameters.
    """
    return target_dist.log_prob(actions) - behaviour_dist.log_prob(actions)  # [T, B, ...]


def _clip(rhos: tf.Tensor, threshold: float | tf.Tensor | None) -> tf.Tensor:
    """Returns min(threshold, rhos), or `rhos` if `threshold` is None."""
    if threshold is None:
        return rhos
    return tf.minimum(tf.cast(threshold, rhos.dtype), rhos)


def _check_shapes(
    log_rhos: tf.Tensor,
    discounts: tf.Tensor,
    rewards: tf.Tensor,
    values: tf.Tensor,
    bootstrap_value: tf.Tensor,
) -> None:
    """Raises ValueError naming the first input whose static shape does not fit."""
    rank = _rank(values, "values")
    if rank < 2:
        raise ValueError(f"values must have rank >= 2 ([T, B, ...]), got shape {values.shape}.")
    for name, tensor in (("log_rhos", log_rhos), ("discounts", discounts), ("rewards", rewards)):
        _require_rank(tensor, name, rank)
        if not tensor.shape.is_compatible_with(values.shape):
            raise ValueError(
                f"{name} must have the shape of values {values.shape}, got {tensor.shape}."
            )
    _require_rank(bootstrap_value, "bootstrap_value", rank - 1)
    if not bootstrap_value.shape.is_compatible_with(values.shape[1:]):
        raise ValueError(
            f"bootstrap_value must have shape values.shape[1:] = {values.shape[1:]}, "
            f"got {bootstrap_value.shape}."
        )


def _rank(tensor: tf.Tensor, name: str) -> int:
    """Returns the static rank of `tensor`, raising ValueError if it is unknown."""
    if tensor.shape.rank is None:
        raise ValueError(f"{name} must have a statically known rank.")
    return tensor.shape.rank


def _require_rank(tensor: tf.Tensor, name: str, rank: int) -> None:
    """Raises ValueError naming `name` unless `tensor` has static rank `rank`."""
    if _rank(tensor, name) != rank:
        raise ValueError(
            f"{name} must have rank {rank}, got rank {tensor.shape.rank} (shape {tensor.shape})."
        )
