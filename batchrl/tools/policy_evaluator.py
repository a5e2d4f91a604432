"""An algorithm that acts with another's deterministic policy and learns nothing."""

from __future__ import annotations

from batchrl.core import Algorithm


class PolicyEvaluator(Algorithm):
    """Acts with `algo.act(observ, deterministic=True)`; ignores all experience.

    `algo` needs an `act(observ, deterministic)` method that returns environment actions
    [K, ...] for raw observations [K, ...], as `IMPALA` has; its `evaluator()` returns
    `PolicyEvaluator(self)` for `batchrl.tools.evaluation.Evaluation` to run.
    """

    def __init__(self, algo):
        super().__init__(name="policy_evaluator")
        self._algo = algo

    def begin_episodes(self, agent_indices):
        pass

    def perform(self, agent_indices, observ):
        return self._algo.act(observ, deterministic=True)

    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        pass

    def end_episodes(self, agent_indices):
        pass
