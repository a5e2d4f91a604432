"""Batched algorithms and the interface they implement."""

from batchrl.algorithms.base import Algorithm
from batchrl.algorithms.ppo import PPO

__all__ = ["PPO", "Algorithm"]
