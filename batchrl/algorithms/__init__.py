"""Batched algorithms and the interface they implement."""

from batchrl.algorithms.impala import IMPALA
from batchrl.algorithms.ppo import PPO
from batchrl.core import Algorithm

__all__ = ["IMPALA", "PPO", "Algorithm"]
