"""IMPALA: an actor-learner algorithm with V-trace off-policy correction."""

from batchrl.algorithms.impala import vtrace

__all__ = ["vtrace"]
