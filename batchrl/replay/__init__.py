"""Replay buffers held in TensorFlow variables, for off-policy algorithms (DQN, SAC, Ape-X).

So far the `SumTree` that prioritized replay samples from: leaves set in one scatter per
level, and prefix sums found by a descent vectorized over the draws, eagerly, in
`tf.function` and under XLA. What to sample when lives in the algorithms.
"""

from batchrl.replay.sum_tree import SumTree

__all__ = ["SumTree"]
