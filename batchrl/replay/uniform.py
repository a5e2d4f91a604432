"""A replay buffer in TensorFlow variables that samples its items uniformly."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from batchrl.replay.random_stream import RandomStream
from batchrl.replay.ring import Ring


class UniformReplay(tf.Module):
    """The last `capacity` items added, sampled uniformly with replacement.

        replay = UniformReplay(capacity, {"observ": tf.TensorSpec([4]), ...}, seed)
        replay.add(items)                                       # leaves [K, ...]
        indices, weights, items = replay.sample(batch_size, beta)

    The interface is `PrioritizedReplay`'s, so an algorithm can take either: `add`
    ignores `priorities`, `sample` ignores `beta` and returns weights of 1, and
    `update_priorities` does nothing. Sampling draws from a `RandomStream`, stateless
    random ops seeded with (`seed`, the number of samples so far), so a run is
    reproducible; the count survives `tf.train.Checkpoint` with the items, head and
    size, and after a restore the next sample is the one the saved buffer would have
    drawn. Every method works eagerly, inside `tf.function` and under XLA.
    """

    def __init__(self, capacity: int, spec: Any, seed: int = 0, name: str = "uniform_replay"):
        """Creates an empty buffer.

        Args:
          capacity: the number of items held, at least 1.
          spec: a nested structure (dicts, tuples) of fully defined `tf.TensorSpec`, one item.
          seed: the seed of the sampling; part of the configuration, not of a checkpoint.
          name: name of the module.
        """
        super().__init__(name=name)
        self.capacity = int(capacity)
        with self.name_scope:
            self.ring = Ring(capacity, spec)
            self.stream = RandomStream(seed)

    @property
    def spec(self) -> Any:
        """The spec of one item."""
        return self.ring.spec

    def size(self) -> tf.Tensor:
        """The number of items held, an int32 scalar in [0, capacity]."""
        return self.ring.size()

    def add(self, items: Any, priorities: tf.Tensor | None = None) -> tf.Tensor:
        """Writes K items after the last ones added, over the oldest once full.

        Args:
          items: the spec's structure, each leaf [K, ...] with K static, 1 <= K <= capacity.
          priorities: ignored, so that the caller of a prioritized buffer works with this.

        Returns:
          int32 [K], the indices the items were written at.
        """
        del priorities
        return self.ring.write(items)

    def sample(
        self, batch_size: int, beta: float | tf.Tensor = 0.0
    ) -> tuple[tf.Tensor, tf.Tensor, Any]:
        """Draws `batch_size` items uniformly from the ones held, with replacement.

        From an empty buffer, eagerly this raises ValueError; inside a graph, where a check
        would cost a host round trip or not compile, it returns index 0 (items of zeros).

        Args:
          batch_size: the number of items N, a Python int.
          beta: ignored (the importance weights are 1).

        Returns:
          indices: int32 [N] in [0, size).
          weights: float32 [N], ones.
          items: the spec's structure, each leaf [N, ...].
        """
        del beta
        size = self.size()
        if tf.executing_eagerly() and size == 0:
            raise ValueError(f"{self.name}: sample from an empty buffer")
        uniform = self.stream.uniform([batch_size], tf.float64)  # [N]
        scaled = tf.floor(uniform * tf.cast(size, tf.float64))  # [N]
        indices = tf.clip_by_value(tf.cast(scaled, tf.int32), 0, tf.maximum(size - 1, 0))
        return indices, tf.ones([batch_size]), self.ring.read(indices)

    def update_priorities(self, indices: tf.Tensor, priorities: tf.Tensor) -> None:
        """Does nothing: the interface of `PrioritizedReplay`."""
        del indices, priorities
