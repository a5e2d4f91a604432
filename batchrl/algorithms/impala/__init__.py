"""IMPALA: an actor-learner algorithm with V-trace off-policy correction."""

from batchrl.algorithms.impala import bootstrap, losses, rewards, vtrace
from batchrl.algorithms.impala.behaviour_policy import ImpalaBehaviourPolicy
from batchrl.algorithms.impala.impala import IMPALA

__all__ = ["IMPALA", "ImpalaBehaviourPolicy", "bootstrap", "losses", "rewards", "vtrace"]
