"""DQN: deep Q-learning with replay, n-step double-DQN targets and dueling networks in the graph."""

from batchrl.algorithms.dqn import exploration, targets
from batchrl.algorithms.dqn.dqn import DQN
from batchrl.algorithms.dqn.networks import DuelingQNetwork, make_q_network

__all__ = ["DQN", "DuelingQNetwork", "exploration", "make_q_network", "targets"]
