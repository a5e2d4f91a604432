"""PPO's losses as pure functions: the clipped surrogate, the KL penalty and its adaptive
coefficient, the value loss, each member's gradient clipping, and `minibatch_loss`, which
puts them together as the `ppo` section says."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import tensorflow as tf

from batchrl.algorithms.ppo.advantages import masked_mean

# Range that `update_penalty_coefficient` keeps the KL penalty coefficient in.
MIN_PENALTY_COEFFICIENT = 1e-6
MAX_PENALTY_COEFFICIENT = 1e6


class KLPenaltyExtra(NamedTuple):
    """Components of `kl_penalty_loss`, each a scalar; their sum is the loss."""

    surrogate_loss: tf.Tensor  # -mean(ratio * advantage)
    kl_penalty: tf.Tensor  # coefficient * mean(kl)
    kl_cutoff: tf.Tensor  # cutoff_coef * mean(relu(kl - cutoff_factor * kl_target)^2)
    mean_kl: tf.Tensor  # mean(kl)
    cutoff_fraction: tf.Tensor  # fraction of steps with kl > cutoff_factor * kl_target


class ClippedSurrogateExtra(NamedTuple):
    """Diagnostics of `clipped_surrogate_loss`, each a scalar."""

    clip_fraction: tf.Tensor  # fraction of steps with |ratio - 1| > clip_ratio
    mean_ratio: tf.Tensor  # mean(ratio)


def by_row(value, axis, dtype) -> tf.Tensor:
    """A setting shaped for per-step terms: each member's [M] as [M, 1] when the losses
    reduce over `axis` (the steps of each member's rows [M, n]); a scalar as it is."""
    value = tf.cast(value, dtype)
    return value[..., None] if axis is not None and value.shape.rank else value


def update_penalty_coefficient(
    coefficient: float | tf.Tensor,
    kl: float | tf.Tensor,
    kl_target: float | tf.Tensor,
) -> tf.Tensor:
    """Adapts the KL penalty coefficient after an update phase, as BatchPPO does.

        coefficient * 1.5   if kl > 1.3 * kl_target
        coefficient / 1.5   if kl < 0.7 * kl_target
        coefficient         otherwise

    From "Proximal Policy Optimization Algorithms" (Schulman et al., 2017,
    https://arxiv.org/abs/1707.06347, section 4) with the constants of BatchPPO
    (Hafner et al., 2017, `agents/algorithms/ppo/ppo.py`, `_adjust_penalty`). The
    result is clipped to [MIN_PENALTY_COEFFICIENT, MAX_PENALTY_COEFFICIENT] = [1e-6, 1e6]
    so that a long run of too small or too large KL changes cannot drive it to zero or
    to infinity, from where it would take many phases to recover.

    Args:
      coefficient: Scalar current coefficient.
      kl: Scalar mean KL(old || new) measured over the batch after the update phase.
      kl_target: Scalar desired KL change per update phase.

    Returns:
      Scalar new coefficient, of the dtype of `coefficient`.
    """
    coefficient = tf.convert_to_tensor(coefficient)
    dtype = coefficient.dtype
    kl = tf.cast(kl, dtype)
    kl_target = tf.cast(kl_target, dtype)
    new = tf.where(
        kl > 1.3 * kl_target,
        coefficient * 1.5,
        tf.where(kl < 0.7 * kl_target, coefficient / 1.5, coefficient),
    )
    return tf.clip_by_value(new, MIN_PENALTY_COEFFICIENT, MAX_PENALTY_COEFFICIENT)


def kl_penalty_loss(
    log_prob_new: tf.Tensor,
    log_prob_old: tf.Tensor,
    advantage: tf.Tensor,
    kl: tf.Tensor,
    coefficient: float | tf.Tensor,
    kl_target: float | tf.Tensor,
    cutoff_factor: float = 2.0,
    cutoff_coef: float = 1000.0,
    mask: tf.Tensor | None = None,
    axis=None,
) -> tuple[tf.Tensor, KLPenaltyExtra]:
    """BatchPPO's policy loss: importance-sampled surrogate, KL penalty, KL cutoff.

        ratio_t = exp(log pi(a_t | s_t) - log pi_old(a_t | s_t))
        loss = -mean(ratio * A)
               + coefficient * mean(KL)
               + cutoff_coef * mean(relu(KL - cutoff_factor * kl_target)^2)

    The first two terms are the adaptive KL penalty objective of "Proximal Policy
    Optimization Algorithms" (Schulman et al., 2017, https://arxiv.org/abs/1707.06347,
    section 4); the third is the steep penalty above twice the target that BatchPPO
    adopts from Heess et al. (2017) ("TensorFlow Agents", Hafner et al., 2017,
    https://arxiv.org/abs/1709.02878; `agents/algorithms/ppo/ppo.py`, `_policy_loss`).

    The original applies the cutoff to each episode's time-averaged KL; here it
    applies to whatever `kl` holds, so pass per-step KL [T, B] with `mask`, or
    per-episode KL with a matching shape and no mask. No gradient flows into
    `log_prob_old`, `advantage` or `coefficient`.

    Args:
      log_prob_new: [T, B] log-probabilities of the actions under the current policy.
      log_prob_old: [T, B] log-probabilities under the policy that collected the data.
      advantage: [T, B] advantages.
      kl: [T, B] KL(pi_old || pi) at each step, differentiable in the current policy.
      coefficient: Scalar KL penalty coefficient (see `update_penalty_coefficient`).
      kl_target: Scalar desired KL change per update phase.
      cutoff_factor: The cutoff penalty acts above `cutoff_factor * kl_target`.
      cutoff_coef: Weight of the squared excess KL above the cutoff.
      mask: Optional [T, B] bool or {0, 1}; zero marks padded steps to ignore.
      axis: None, or the axis of the steps for M members' rows [M, n] at once: then
        the settings may be each member's [M], and the loss and components are [M].

    Returns:
      A scalar loss to minimize and a `KLPenaltyExtra` of its components.
    """
    log_prob_new = tf.convert_to_tensor(log_prob_new)
    dtype = log_prob_new.dtype
    log_prob_old = tf.stop_gradient(tf.cast(log_prob_old, dtype))  # [T, B]
    advantage = tf.stop_gradient(tf.cast(advantage, dtype))  # [T, B]
    kl = tf.cast(kl, dtype)  # [T, B]
    coefficient = tf.stop_gradient(tf.cast(coefficient, dtype))
    threshold = by_row(cutoff_factor, axis, dtype) * by_row(kl_target, axis, dtype)
    ratio = tf.exp(log_prob_new - log_prob_old)  # [T, B]
    surrogate_loss = -masked_mean(ratio * advantage, mask, axis)
    mean_kl = masked_mean(kl, mask, axis)
    kl_penalty = coefficient * mean_kl
    excess = tf.nn.relu(kl - threshold)  # [T, B]
    kl_cutoff = tf.cast(cutoff_coef, dtype) * masked_mean(tf.square(excess), mask, axis)
    cutoff_fraction = masked_mean(tf.cast(kl > threshold, dtype), mask, axis)
    loss = surrogate_loss + kl_penalty + kl_cutoff
    return loss, KLPenaltyExtra(
        surrogate_loss=surrogate_loss,
        kl_penalty=kl_penalty,
        kl_cutoff=kl_cutoff,
        mean_kl=mean_kl,
        cutoff_fraction=cutoff_fraction,
    )


def clipped_surrogate_loss(
    log_prob_new: tf.Tensor,
    log_prob_old: tf.Tensor,
    advantage: tf.Tensor,
    clip_ratio: float | tf.Tensor,
    mask: tf.Tensor | None = None,
    axis=None,
) -> tuple[tf.Tensor, ClippedSurrogateExtra]:
    """PPO's clipped surrogate policy loss.

        ratio_t = exp(log pi(a_t | s_t) - log pi_old(a_t | s_t))
        loss = -mean(min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A))

    From "Proximal Policy Optimization Algorithms" (Schulman et al., 2017,
    https://arxiv.org/abs/1707.06347, equation 7). The clip fraction is the share of
    steps with |ratio - 1| > eps. No gradient flows into `log_prob_old` or `advantage`.

    Args:
      log_prob_new: [T, B] log-probabilities of the actions under the current policy.
      log_prob_old: [T, B] log-probabilities under the policy that collected the data.
      advantage: [T, B] advantages.
      clip_ratio: Scalar eps.
      mask: Optional [T, B] bool or {0, 1}; zero marks padded steps to ignore.
      axis: None, or the axis of the steps for M members' rows [M, n] at once: then
        `clip_ratio` may be each member's [M], and the loss and diagnostics are [M].

    Returns:
      A scalar loss to minimize and a `ClippedSurrogateExtra`.
    """
    log_prob_new = tf.convert_to_tensor(log_prob_new)
    dtype = log_prob_new.dtype
    log_prob_old = tf.stop_gradient(tf.cast(log_prob_old, dtype))  # [T, B]
    advantage = tf.stop_gradient(tf.cast(advantage, dtype))  # [T, B]
    clip_ratio = by_row(clip_ratio, axis, dtype)
    ratio = tf.exp(log_prob_new - log_prob_old)  # [T, B]
    clipped = tf.clip_by_value(ratio, 1.0 - clip_ratio, 1.0 + clip_ratio)  # [T, B]
    objective = tf.minimum(ratio * advantage, clipped * advantage)  # [T, B]
    loss = -masked_mean(objective, mask, axis)
    outside = tf.cast(tf.abs(ratio - 1.0) > clip_ratio, dtype)
    return loss, ClippedSurrogateExtra(
        clip_fraction=masked_mean(outside, mask, axis), mean_ratio=masked_mean(ratio, mask, axis)
    )


def value_loss(
    value: tf.Tensor,
    target: tf.Tensor,
    old_value: tf.Tensor | None = None,
    clip: float | tf.Tensor | None = None,
    mask: tf.Tensor | None = None,
    axis=None,
) -> tf.Tensor:
    """Squared error of the value function, optionally clipped around the old values.

        loss = 0.5 * mean((V - target)^2)

    With `clip`, as in OpenAI baselines' `ppo2` (Dhariwal et al., 2017):

        V_clip = V_old + clip(V - V_old, -clip, clip)
        loss = 0.5 * mean(max((V - target)^2, (V_clip - target)^2))

    No gradient flows into `target` or `old_value`.

    Args:
      value: [T, B] predicted values.
      target: [T, B] value targets, for example from `lambda_returns`.
      old_value: [T, B] values predicted when the data was collected; needed with
        `clip`.
      clip: Optional scalar; None turns clipping off.
      mask: Optional [T, B] bool or {0, 1}; zero marks padded steps to ignore.
      axis: None, or the axis of the steps for M members' rows [M, n] at once: then
        `clip` may be each member's [M], and the loss is [M].

    Returns:
      Scalar loss.

    Raises:
      ValueError: If `clip` is given without `old_value`.
    """
    value = tf.convert_to_tensor(value)
    target = tf.stop_gradient(tf.cast(target, value.dtype))  # [T, B]
    error = tf.square(value - target)  # [T, B]
    if clip is not None:
        if old_value is None:
            raise ValueError("value_loss: clip needs old_value.")
        old_value = tf.stop_gradient(tf.cast(old_value, value.dtype))  # [T, B]
        clip = by_row(clip, axis, value.dtype)
        clipped = old_value + tf.clip_by_value(value - old_value, -clip, clip)  # [T, B]
        error = tf.maximum(error, tf.square(clipped - target))  # [T, B]
    return 0.5 * masked_mean(error, mask, axis)


def clip_by_member_norm(
    gradients: list[tf.Tensor], clip_norm: float
) -> tuple[list[tf.Tensor], tf.Tensor]:
    """`tf.clip_by_global_norm` for each member of a population, on gradients [M, ...].

        norm_m = sqrt(sum over tensors of sum(g_m^2))
        g_m <- g_m * clip_norm / max(norm_m, clip_norm)

    Member m's gradients are scaled by its own norm, as a run of that member alone
    (Pascanu et al. 2013, https://arxiv.org/abs/1211.5063, as tf.clip_by_global_norm).

    Args:
      gradients: tensors [M, ...], the same M leading each.
      clip_norm: the largest norm left unscaled.

    Returns:
      The scaled gradients, and the norms [M] before scaling.
    """
    half_squares = [
        tf.reduce_sum(tf.square(g), axis=list(range(1, g.shape.rank))) / 2 for g in gradients
    ]  # [M] each
    norm = tf.sqrt(tf.add_n(half_squares) * 2)  # [M]
    scale = clip_norm * tf.minimum(1.0 / norm, 1.0 / clip_norm)  # [M]
    scale += norm - norm  # NaN norms give NaN gradients, as tf.clip_by_global_norm's do.
    clipped = [g * tf.reshape(scale, [-1] + [1] * (g.shape.rank - 1)) for g in gradients]
    return clipped, norm


def minibatch_loss(
    cfg: Mapping[str, Any], terms: dict[str, tf.Tensor], axis=None
) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
    """PPO's loss on a minibatch of M steps: policy loss + c_v value loss - c_e entropy.

    Args:
      cfg: the `ppo` section (objective, clip_ratio, kl_*, value_clip, value_coef,
        entropy_coef), or a mapping of its keys in which a population member's own
        settings are scalar tensors (`value_clip` 0 still turns clipping off).
      terms: `log_prob` and `old_log_prob` of the samples under the current and the
        acting policy, `entropy` of the current policy, `value`, `advantage`, `target`,
        `old_value`, each [M]; with the kl_penalty objective also `kl` [M],
        KL(old || new) at each step, and `penalty`, the scalar coefficient.
      axis: None; or, for a population's members at once, the axis of the M steps in
        terms [members, M], whose settings in `cfg` (and `penalty`) are then each
        member's [members].

    Returns:
      The scalar loss, and the scalar `policy_loss`, `value_loss`, `entropy` and
      `clip_fraction` (0 with kl_penalty); with `axis`, each member's [members].
    """
    if cfg["objective"] == "clip":
        policy_loss, extra = clipped_surrogate_loss(
            terms["log_prob"],
            terms["old_log_prob"],
            terms["advantage"],
            cfg["clip_ratio"],
            axis=axis,
        )
        clip_fraction = extra.clip_fraction
    else:
        policy_loss, _ = kl_penalty_loss(
            terms["log_prob"],
            terms["old_log_prob"],
            terms["advantage"],
            terms["kl"],
            terms["penalty"],
            cfg["kl_target"],
            cfg["kl_cutoff_factor"],
            cfg["kl_cutoff_coef"],
            axis=axis,
        )
        clip_fraction = tf.zeros_like(policy_loss)
    value, target, old_value = terms["value"], terms["target"], terms["old_value"]
    value_clip = cfg["value_clip"]
    if isinstance(value_clip, tf.Tensor):  # A member's own: 0 turns clipping off.
        value_term = tf.where(
            value_clip > 0,
            value_loss(value, target, old_value, value_clip, axis=axis),
            value_loss(value, target, old_value, axis=axis),
        )
    else:
        clip = value_clip if value_clip > 0 else None
        value_term = value_loss(value, target, old_value, clip, axis=axis)
    entropy = tf.reduce_mean(terms["entropy"], axis)
    loss = policy_loss + cfg["value_coef"] * value_term - cfg["entropy_coef"] * entropy
    metrics = {
        "policy_loss": policy_loss,
        "value_loss": value_term,
        "entropy": entropy,
        "clip_fraction": clip_fraction,
    }
    return loss, metrics
