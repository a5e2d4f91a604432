"""An algorithm that acts with a policy's deterministic actions and learns nothing."""

from __future__ import annotations

import tensorflow as tf

from batchrl.core import Algorithm, Policy


class PolicyEvaluator(Algorithm):
    """Acts with `policy.act(observ, deterministic=True)` in `simulate`; ignores experience.

    A recurrent policy (`policy.recurrent`) keeps one state per agent [B, S], restarted
    with `policy.initial_state` when an agent's episode begins and given each step's
    rewards (`policy.observe_reward`). The train loop evaluates
    every algorithm through one of these (`batchrl.training.evaluation.Evaluation`).
    """

    def __init__(self, policy: Policy, batch_size: int):
        """Args:
        policy: what acts, e.g. a trained `PPO`.
        batch_size: the number of environments B it acts in.
        """
        super().__init__(name="policy_evaluator")
        self._policy = policy
        self.autograph = bool(getattr(policy, "autograph", True))
        self._recurrent = bool(getattr(policy, "recurrent", False))
        if self._recurrent:
            state = policy.initial_state(batch_size)  # [B, S]
            self._state = tf.Variable(tf.zeros_like(state), trainable=False)

    def begin_episodes(self, agent_indices):
        if self._recurrent:
            rows = agent_indices[:, None]
            self._state.scatter_nd_update(rows, self._policy.initial_state(tf.size(agent_indices)))

    def perform(self, agent_indices, observ):
        if not self._recurrent:
            return self._policy.act(observ, deterministic=True)
        state = tf.gather(self._state, agent_indices)  # [K, S]
        action, state = self._policy.act_recurrent(observ, state, deterministic=True)
        self._state.scatter_nd_update(agent_indices[:, None], state)
        return action

    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        if self._recurrent:  # A policy that reads the last reward keeps it in its state.
            state = tf.gather(self._state, agent_indices)  # [K, S]
            observed = self._policy.observe_reward(state, reward)
            if observed is not state:  # Else the policy reads no reward: nothing to write.
                self._state.scatter_nd_update(agent_indices[:, None], observed)

    def end_episodes(self, agent_indices):
        pass
