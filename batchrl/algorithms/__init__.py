"""The algorithms: one folder each, each a learner with a public `learn(batch)`."""

from batchrl.algorithms.impala import IMPALA
from batchrl.algorithms.ppo import PPO
from batchrl.core import Algorithm

__all__ = ["IMPALA", "PPO", "Algorithm"]
