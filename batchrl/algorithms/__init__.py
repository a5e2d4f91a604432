"""Batched algorithms and the interface they implement."""

from batchrl.algorithms.base import Algorithm
from batchrl.algorithms.impala import IMPALA
from batchrl.algorithms.ppo import PPO

__all__ = ["IMPALA", "PPO", "Algorithm"]
