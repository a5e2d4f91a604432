"""SAC: soft actor-critic with twin critics, a learned temperature and replay in the graph."""

from batchrl.algorithms.sac import utility
from batchrl.algorithms.sac.sac import SAC

__all__ = ["SAC", "utility"]
