"""Batched algorithms and the interface they implement."""

from batchrl.algorithms.base import Algorithm

__all__ = ["Algorithm"]
