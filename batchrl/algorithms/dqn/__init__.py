"""DQN: deep Q-learning with replay, n-step double-DQN targets and dueling networks in the graph."""

from batchrl.algorithms.dqn import utility
from batchrl.algorithms.dqn.dqn import DQN
from batchrl.algorithms.dqn.networks import DuelingQNetwork, make_q_network

__all__ = ["DQN", "DuelingQNetwork", "make_q_network", "utility"]
