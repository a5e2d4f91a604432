"""One member of a PPO population acting alone, for export."""

from __future__ import annotations

import tensorflow as tf

from batchrl.algorithms.ppo.layout import flat
from batchrl.algorithms.ppo.member_networks import per_member
from batchrl.core import Policy
from batchrl.parts.untracked import Untracked


class MemberPolicy(tf.Module, Policy):
    """One member of a `PopulationPPO` acting alone, for `policies/member-<m>` and `policy/`.

    It holds copies of the member's policy parameters, log std and observation
    normalizer, taken when it is made, and its deterministic `act` runs the population's
    ops on a member axis of one: it acts as the member did in the population's `act`
    (`act_recurrent` for a recurrent population, with `initial_state`). An exported
    SavedModel of it holds only this member's variables.
    """

    autograph = False

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
        self.recurrent = population.recurrent
        self._network = Untracked({"policy": population.policy, "head": population._nets.head})
        self._sample_dtype = population._nets.sample_dtype
        self.observ_normalizer = population.observ_normalizer.select(rows)
        self.policy_params = tf.Variable(
            tf.gather(population.policy_params, rows), trainable=False
        )  # [1, D_policy]
        self.log_std = None
        if population.log_std is not None:
            self.log_std = tf.Variable(tf.gather(population.log_std, rows), trainable=False)

    def act(self, observ, deterministic: bool = True):
        """The member's greedy actions [N, ...] for raw observations [N, ...]."""
        if self.recurrent:
            raise ValueError("A recurrent member needs its state: use act_recurrent().")
        policy = self._network.variables["policy"]
        output = policy.apply(self.policy_params, self._normalize(observ, deterministic))
        return self._action(output)  # output [1, N, size]

    def initial_state(self, batch_size) -> tf.Tensor:
        """The states [N, S] of a recurrent member at the start of an episode (zeros)."""
        return self._network.variables["policy"].initial_state(batch_size)

    def act_recurrent(self, observ, state, deterministic: bool = True):
        """The member's greedy actions [N, ...] and new states [N, S]."""
        policy = self._network.variables["policy"]
        normalized = self._normalize(observ, deterministic)  # [1, N, O]
        output, state = policy.step(self.policy_params, normalized, state[None])
        return self._action(output), state[0]

    def _normalize(self, observ, deterministic):
        """Normalized observations [1, N, O] of raw ones [N, O]."""
        if not deterministic:
            raise ValueError("A member's policy acts deterministically (its mode).")
        normalized = self.observ_normalizer.normalize(observ[:, None])  # [N, 1, O]
        return tf.transpose(normalized, [1, 0, 2])  # [1, N, O]

    def _action(self, output):
        """Environment actions [N, ...] of the mode of outputs [1, N, size]."""
        head = self._network.variables["head"]
        log_std = None if self.log_std is None else per_member(head, self.log_std)
        sample = tf.cast(head(output, log_std).mode(), self._sample_dtype)
        return head.to_env_action(flat(sample))
