"""IMPALA's reward clipping (Espeholt et al. 2018; TorchBeast)."""

from __future__ import annotations

import tensorflow as tf

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
