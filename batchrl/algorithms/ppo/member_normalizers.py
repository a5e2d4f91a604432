"""Each member's observation normalizer and reward scaler, on a member axis [M]."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import tensorflow as tf

from batchrl.algorithms.ppo.layout import MemberLayout
from batchrl.algorithms.ppo.member_settings import MemberSettings
from batchrl.parts.normalizer import RewardScaler, StreamingNormalizer


class MemberNormalizers:
    """What `PPO`'s normalizers compute, for M members of B agents each in one pass.

    Member m's statistics are row m of a `StreamingNormalizer` of shape [M, O] and of a
    `RewardScaler` of shape [M], at the member's own clip bounds and discount:

        normalized = norms.normalize(observ)     # [M B, O] -> [M, B, O]
        reward = norms.update(observ, reward, done)   # [M B] scaled rewards
        norms.copy_rows(source)                  # PBT: member m takes source[m]'s

    Not a `tf.Module`: the algorithm tracks `observ` and `reward` (as `observ_normalizer`
    and `reward_scaler`) under the names its checkpoints have always had.
    """

    def __init__(
        self,
        cfg: Mapping,
        settings: MemberSettings,
        layout: MemberLayout,
        observ_shape: Sequence[int],
    ):
        """Args:
        cfg: the `ppo` section (normalize_observ, normalize_reward).
        settings: the members' `observ_clip`, `reward_clip` and `discount` (which
          population-based training may change: the scaler reads it at each step).
        layout: M members of B agents.
        observ_shape: one observation's, [O].
        """
        self._layout = layout
        self._normalize_reward = cfg["normalize_reward"]
        normalize = cfg["normalize_observ"]
        observ_clip = settings.clip("observ_clip")
        if isinstance(observ_clip, tf.Tensor):
            observ_clip = observ_clip[:, None]  # [M, 1], for values [N, M, O].
        self.observ = StreamingNormalizer(
            (layout.members, *observ_shape),
            center=normalize,
            scale=normalize,
            clip=observ_clip if normalize else 0.0,
            name="observ",
        )
        self.reward = RewardScaler(
            layout.batch_size,
            settings.live("discount"),
            settings.clip("reward_clip"),
            "reward",
            shape=(layout.members,),
        )

    def normalize(self, observ: tf.Tensor) -> tf.Tensor:
        """Normalized observations [M, N, O] of raw ones [M N, O], each by its member's."""
        normalized = self.observ.normalize(self._layout.by_agent(observ))  # [N, M, O]
        return tf.transpose(normalized, [1, 0, 2])

    def update(self, observ, reward, done) -> tf.Tensor:
        """Updates the statistics with a step of all agents [M B, ...]; rewards to store.

        Returns:
          The rewards [M B], scaled if `normalize_reward`.
        """
        by_agent = self._layout.by_agent
        self.observ.update(by_agent(observ))  # [B, M, O]
        if not self._normalize_reward:
            return reward
        indices = tf.range(self._layout.batch_size)
        scaled = self.reward.scale(indices, by_agent(reward), by_agent(done))  # [B, M]
        return tf.reshape(tf.transpose(scaled), [-1])  # [M B]

    def copy_rows(self, source: tf.Tensor) -> None:
        """Member m takes member source[m]'s statistics (population-based training)."""
        self.observ.copy_rows(source)
        self.reward.normalizer.copy_rows(source)
