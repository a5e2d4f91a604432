"""IMPALA's losses, reward clipping and episode-boundary targets as pure functions."""

from __future__ import annotations

import tensorflow as tf

from batchrl.networks.mlp import batch_apply

REWARD_CLIPPINGS = ("none", "abs_one", "soft_asymmetric")


def clip_rewards(reward: tf.Tensor, mode: str) -> tf.Tensor:
    """Clips rewards as IMPALA's learner does before computing V-trace targets.

    Espeholt et al., 2018 (https://arxiv.org/abs/1802.01561), Appendix D.1 and Table G.1:

        none:             r
        abs_one:          clip(r, -1, 1)                       (single tasks, Atari)
        soft_asymmetric:  5 tanh(r / 5)       if r >= 0        (DMLab-30)
                          1.5 tanh(r / 5)     if r < 0

    `soft_asymmetric` is the "optimistic asymmetric clipping" as the authors' released
    learner (deepmind/scalable_agent, experiment.py) and the TorchBeast-based learners
    that offer it compute it: squeezed = tanh(r / 5), then
    5 * (0.3 * squeezed if r < 0 else squeezed). The
    caption of the paper's Figure D.1 writes 0.3 min(tanh(r), 0) + 5 max(tanh(r), 0),
    without the division by 5 inside tanh and with 0.3 instead of 1.5 for negative
    rewards; the code is what produced the paper's results, so it is what we follow.

    Args:
      reward: float rewards of any shape.
      mode: one of `REWARD_CLIPPINGS`.

    Returns:
      Clipped rewards of the shape and dtype of `reward`.

    Raises:
      ValueError: on an unknown `mode`.
    """
    reward = tf.convert_to_tensor(reward)
    if mode == "none":
        return reward
    if mode == "abs_one":
        return tf.clip_by_value(reward, -1.0, 1.0)
    if mode == "soft_asymmetric":
        squeezed = tf.tanh(reward / 5.0)
        return 5.0 * tf.where(reward < 0, 0.3 * squeezed, squeezed)
    raise ValueError(f"Unknown reward clipping {mode!r}; valid choices are {REWARD_CLIPPINGS}.")


def next_values(values, value, next_observ, truncated, inner_rank: int) -> tf.Tensor:
    """V(x'_t) [T, B] wherever `truncation_bootstrap` and V-trace read it, from one pass
    over the B final observations instead of T x B.

    The observation after step t is the unroll's next one, x'_t = x_{t+1}, unless step t
    ended an episode. After a termination V(x'_t) is never read (its discount is 0); after
    a truncation it is, so when a step other than the last was truncated the values of
    all T x B `next_observ` are computed (a `tf.cond`, rare: a time limit inside an
    unroll). The last step's x'_{T-1}, V-trace's bootstrap, is always evaluated.

    Args:
      values: a function from observations [N, ...] to values [N].
      value: [T, B] V(x_t) of the unroll's observations.
      next_observ: [T, B, ...] x'_t, the observation each step returned.
      truncated: bool [T, B].
      inner_rank: the rank of one observation.

    Returns:
      [T, B]: V(x_{t+1}) where step t did not end an episode, V(x'_t) where it was
      truncated and at t = T - 1, and either where it terminated.
    """
    last = values(next_observ[-1])  # [B]
    shifted = tf.concat([value[1:], last[None]], 0)  # [T, B]
    return tf.cond(
        tf.reduce_any(truncated[:-1]),
        lambda: batch_apply(values, next_observ, inner_rank),
        lambda: shifted,
    )


def truncation_bootstrap(
    reward: tf.Tensor,
    terminated: tf.Tensor,
    truncated: tf.Tensor,
    next_value: tf.Tensor,
    discount: float,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Rewards and discounts for V-trace that respect Gymnasium's two kinds of episode end.

    V-trace (`vtrace.from_importance_weights`) takes the value of step t + 1 of the unroll
    as the successor of step t. After an episode end that successor belongs to the next
    episode, so the trace must be cut there; after a truncation the target must still
    bootstrap from the value of the episode's final observation x'_t:

        discounts_t = gamma * (1 - terminated_t) * (1 - truncated_t)
        rewards_t   = r_t + gamma * V(x'_t)   if truncated_t and not terminated_t
                      r_t                     otherwise

    With a zero discount the trace coefficient products stop at step t, and V-trace's
    temporal difference at t becomes rho_t (r_t + gamma V(x'_t) - V(x_t)): exactly the
    one-step target of a truncated step. A step both terminated and truncated counts as
    terminated. Steps that did not end an episode are unchanged.

    Args:
      reward: [T, B] rewards r_t, already clipped.
      terminated: bool [T, B], step t reached a terminal state.
      truncated: bool [T, B], the episode was cut short after step t.
      next_value: [T, B] V(x'_t), the value of the observation step t returned (the
        final one when the episode ended); only read where truncated.
      discount: gamma.

    Returns:
      A tuple of `rewards` [T, B] and `discounts` [T, B] for V-trace.
    """
    reward = tf.convert_to_tensor(reward)
    bootstrap = tf.logical_and(truncated, tf.logical_not(terminated))  # [T, B]
    ended = tf.logical_or(terminated, truncated)  # [T, B]
    gamma = tf.cast(discount, reward.dtype)
    rewards = reward + tf.where(bootstrap, gamma * next_value, tf.zeros_like(reward))
    discounts = tf.where(ended, tf.zeros_like(reward), gamma * tf.ones_like(reward))
    return rewards, discounts


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
