"""Proportional prioritized replay (Schaul et al., 2016) over a sum tree in variables."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from batchrl.replay.random_stream import RandomStream
from batchrl.replay.ring import Ring
from batchrl.replay.sum_tree import SumTree, as_indices


class PrioritizedReplay(tf.Module):
    """The last `capacity` items added, sampled in proportion to their priorities.

    Schaul et al., 2016, "Prioritized Experience Replay" (https://arxiv.org/abs/1511.05952),
    the proportional variant. Item i, of raw priority delta_i (e.g. a TD error), is drawn
    with probability

        P(i) = p_i / sum_k p_k,    p_i = (|delta_i| + epsilon)^alpha,

    and weighted by the importance-sampling weight, normalized by the largest weight of
    the sampled batch (Algorithm 1, line 10, as Dopamine reads it),

        w_i = (N * P(i))^(-beta) / max_j w_j,    N = size().

    The p_i live in a `SumTree`. A batch is stratified (Appendix B.2.1): [0, total) is
    split into `batch_size` equal segments and one point is drawn uniformly in each, so the
    indices come in the tree's order. The running maximum priority is kept as |delta| +
    epsilon, before alpha; items added without priorities enter at it, raised to alpha,
    and it starts at 1. Annealing beta is the caller's.

        replay = PrioritizedReplay(capacity, spec, alpha=0.6, seed=seed)
        replay.add(items)                                      # leaves [K, ...]
        indices, weights, items = replay.sample(batch_size, beta)
        replay.update_priorities(indices, td_errors)

    Where items are added while sampled batches are still being learned on (Ape-X's
    shards), an update can arrive for slots overwritten since the sample, and would set
    the priority of another item. With `count_writes` the buffer counts the writes of
    each slot; `writes(indices)` read at the sample and passed to `update_priorities`
    make it drop the updates of slots written since:

        replay = PrioritizedReplay(capacity, spec, count_writes=True)
        indices, weights, items = replay.sample(batch_size, beta)
        writes = replay.writes(indices)
        ...                                                    # more adds meanwhile
        replay.update_priorities(indices, td_errors, writes)

    Sampling draws from a `RandomStream`, seeded with (`seed`, the number of samples so far).
    The items, head, size, tree, maximum priority, sample count and write counts survive
    `tf.train.Checkpoint`: after a restore, the next sample is the one the saved buffer
    would have drawn. Every method works eagerly, inside `tf.function` and under XLA.
    """

    def __init__(
        self,
        capacity: int,
        spec: Any,
        alpha: float = 0.6,
        epsilon: float = 1e-6,
        seed: int = 0,
        count_writes: bool = False,
        name: str = "prioritized_replay",
    ):
        """Creates an empty buffer.

        Args:
          capacity: the number of items held, at least 1.
          spec: a nested structure (dicts, tuples) of fully defined `tf.TensorSpec`, one item.
          alpha: the exponent of the priorities; 0 samples uniformly.
          epsilon: added to |delta| so that no item has priority 0; must be positive.
          seed: the seed of the sampling; part of the configuration, not of a checkpoint.
          count_writes: count the writes of each slot (`writes`), so that
            `update_priorities` can drop updates of slots written since their sample.
            Checkpoints of a buffer without it do not hold the counts.
          name: name of the module.
        """
        super().__init__(name=name)
        if epsilon <= 0:
            raise ValueError(f"epsilon must be positive, got {epsilon}")
        self.capacity = int(capacity)
        self.alpha = float(alpha)
        self.epsilon = float(epsilon)
        self.count_writes = bool(count_writes)
        with self.name_scope:
            self.ring = Ring(capacity, spec)
            self.tree = SumTree(capacity)
            self._max_priority = tf.Variable(1.0, trainable=False, name="max_priority")
            self.stream = RandomStream(seed)
            if self.count_writes:
                zeros = tf.zeros([self.capacity], tf.int64)
                self._writes = tf.Variable(zeros, trainable=False, name="writes")

    @property
    def spec(self) -> Any:
        """The spec of one item."""
        return self.ring.spec

    def size(self) -> tf.Tensor:
        """The number of items held, an int32 scalar in [0, capacity]."""
        return self.ring.size()

    def max_priority(self) -> tf.Tensor:
        """The largest |delta| + epsilon set so far (1 before any), float32, before alpha."""
        return self._max_priority.read_value()

    def writes(self, indices: tf.Tensor) -> tf.Tensor:
        """How many times each slot of `indices` [K] was written, int64 [K] (`count_writes`).

        Raises:
          ValueError: the buffer does not count writes.
        """
        if not self.count_writes:
            raise ValueError(f"{self.name} does not count writes: build it with count_writes=True")
        return tf.gather(self._writes, as_indices(indices))

    def add(self, items: Any, priorities: tf.Tensor | None = None) -> tf.Tensor:
        """Writes K items after the last ones added, over the oldest once full.

        Args:
          items: the spec's structure, each leaf [K, ...] with K static, 1 <= K <= capacity.
          priorities: float32 [K], the raw priorities delta of the items; None gives each the
            maximum priority so far. Given ones raise the maximum as `update_priorities` does.

        Returns:
          int32 [K], the indices the items were written at.
        """
        indices = self.ring.write(items)  # [K]
        if self.count_writes:  # K <= capacity: no slot twice.
            self._writes.scatter_nd_add(indices[:, None], tf.ones_like(indices, tf.int64))
        if priorities is None:
            raw = tf.fill(tf.shape(indices), self._max_priority.read_value())  # [K]
        else:
            raw = self._raise_max(priorities)
        self.tree.set(indices, tf.pow(raw, self.alpha))
        return indices

    def sample(self, batch_size: int, beta: float | tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, Any]:
        """Draws `batch_size` items in proportion to their priorities, stratified.

        From an empty buffer, eagerly this raises ValueError; inside a graph, where a check
        would cost a host round trip or not compile, it returns index 0, weights of 1 and
        items of zeros.

        Args:
          batch_size: the number of items N, a Python int.
          beta: float32 scalar in [0, 1], the exponent of the importance weights.

        Returns:
          indices: int32 [N] in [0, size), nondecreasing (the tree's order).
          weights: float32 [N], the normalized importance weights w_i, in (0, 1].
          items: the spec's structure, each leaf [N, ...].
        """
        size = self.size()
        if tf.executing_eagerly() and size == 0:
            raise ValueError(f"{self.name}: sample from an empty buffer")
        uniform = self.stream.uniform([batch_size])  # [N]
        total = self.tree.total()
        points = (tf.range(batch_size, dtype=tf.float32) + uniform) * (total / batch_size)  # [N]
        indices = tf.clip_by_value(self.tree.find(points), 0, tf.maximum(size - 1, 0))  # [N]
        probability = self.tree.get(indices) / total  # [N]
        beta = tf.convert_to_tensor(beta, tf.float32)
        weights = tf.pow(tf.cast(size, tf.float32) * probability, -beta)  # [N]
        weights = tf.where(size > 0, weights / tf.reduce_max(weights), tf.ones_like(weights))
        return indices, weights, self.ring.read(indices)

    def update_priorities(
        self, indices: tf.Tensor, priorities: tf.Tensor, writes: tf.Tensor | None = None
    ) -> None:
        """Sets the raw priorities delta of the items at `indices`.

        The tree gets (|delta| + epsilon)^alpha; where an index repeats, its last priority
        wins. The maximum priority becomes the largest of itself and every |delta| +
        epsilon given. With `writes`, the entries of slots written since (whose count
        differs) are dropped: those slots keep their priority, and their delta does not
        count for the maximum.

        Args:
          indices: [K], from `sample`: int32, or any integer dtype (int64 from NumPy).
          priorities: float32 [K], the raw priorities delta (e.g. TD errors).
          writes: int64 [K], `writes(indices)` at the sample (`count_writes` only); the
            entries of a repeated index all come from one sample.

        Raises:
          TypeError: `indices` are not integers.
          ValueError: `writes` given to a buffer that does not count writes.
        """
        indices = as_indices(indices)  # [K]
        if writes is None:
            raw = self._raise_max(priorities)  # [K]
            self.tree.set(indices, tf.pow(raw, self.alpha))
            return
        current = self.writes(indices) == tf.cast(writes, tf.int64)  # [K]
        raw = self._raise_max(priorities, current)  # [K]
        self.tree.set(indices, tf.where(current, tf.pow(raw, self.alpha), self.tree.get(indices)))

    def _raise_max(self, priorities: tf.Tensor, counted: tf.Tensor | None = None) -> tf.Tensor:
        """|priorities| + epsilon [K], after raising the maximum priority to the largest of
        them (of those `counted`, bool [K], when given)."""
        raw = tf.abs(tf.convert_to_tensor(priorities, tf.float32)) + self.epsilon  # [K]
        largest = raw if counted is None else tf.where(counted, raw, 0.0)  # [K]
        self._max_priority.assign(tf.maximum(self._max_priority, tf.reduce_max(largest)))
        return raw
