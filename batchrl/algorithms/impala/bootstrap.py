"""Values at episode boundaries: the next values, bootstrapped where an episode was truncated."""

from __future__ import annotations

import tensorflow as tf

from batchrl.networks.mlp import batch_apply


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
