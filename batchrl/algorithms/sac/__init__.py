"""SAC: soft actor-critic with twin critics, a learned temperature and replay in the graph."""

from batchrl.algorithms.sac import utility

__all__ = ["utility"]
