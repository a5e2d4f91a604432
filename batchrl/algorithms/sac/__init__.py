"""SAC: soft actor-critic with twin critics, a learned temperature and replay in the graph;
TD3 on the same critics and replay."""

from batchrl.algorithms.sac import losses, squashed_gaussian, targets
from batchrl.algorithms.sac.sac import SAC
from batchrl.algorithms.sac.td3 import TD3

__all__ = ["SAC", "TD3", "losses", "squashed_gaussian", "targets"]
