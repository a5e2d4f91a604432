"""One member of a PPO population acting alone, for export."""

from __future__ import annotations

import tensorflow as tf

from batchrl.algorithms.ppo.layout import flat
from batchrl.core import Policy
from batchrl.parts.untracked import Untracked


class MemberPolicy(tf.Module, Policy):
    """One member of a `PopulationPPO` acting alone, for `policies/member-<m>` and `policy/`.

    It holds copies of the member's policy parameters, log std and observation
    normalizer, taken when it is made, and its deterministic `act` runs the population's
    ops on a member axis of one: it acts as the member did in the population's `act`. An
    exported SavedModel of it holds only this member's variables.
    """

    autograph = False
    recurrent = False

    def __init__(self, population, member: int):
        """Args:
        population: a `PopulationPPO`.
        member: which member, in [0, M).

        Raises:
          ValueError: there is no such member.
        """
        super().__init__(name=f"member_{member}")
        if not 0 <= member < population.members:
            raise ValueError(f"No member {member} in a population of {population.members}.")
        rows = [member]
        self.member = member
        self._network = Untracked({"policy": population.policy, "head": population._nets.head})
        self._sample_dtype = population._sample_dtype
        self.observ_normalizer = population.observ_normalizer.select(rows)
        self.policy_params = tf.Variable(
            tf.gather(population.policy_params, rows), trainable=False
        )  # [1, D_policy]
        self.log_std = None
        if population.log_std is not None:
            self.log_std = tf.Variable(tf.gather(population.log_std, rows), trainable=False)

    def act(self, observ, deterministic: bool = True):
        """The member's greedy actions [N, ...] for raw observations [N, ...]."""
        if not deterministic:
            raise ValueError("A member's policy acts deterministically (its mode).")
        normalized = self.observ_normalizer.normalize(observ[:, None])  # [N, 1, O]
        normalized = tf.transpose(normalized, [1, 0, 2])  # [1, N, O]
        policy, head = self._network.variables["policy"], self._network.variables["head"]
        output = policy.apply(self.policy_params, normalized)  # [1, N, size]
        log_std = None if self.log_std is None else self.log_std[:, None]
        sample = tf.cast(head(output, log_std).mode(), self._sample_dtype)
        return head.to_env_action(flat(sample))
