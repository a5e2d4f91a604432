"""DQN: deep Q-learning with replay, n-step double-DQN targets and dueling heads in the graph."""

from batchrl.algorithms.dqn import utility
from batchrl.algorithms.dqn.dqn import DQN

__all__ = ["DQN", "utility"]
