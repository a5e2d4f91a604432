"""SAC: soft actor-critic with twin critics, a learned temperature and replay in the graph;
TD3 on the same critics and replay."""

from batchrl.algorithms.sac import utility
from batchrl.algorithms.sac.sac import SAC
from batchrl.algorithms.sac.td3 import TD3

__all__ = ["SAC", "TD3", "utility"]
