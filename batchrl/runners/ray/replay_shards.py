"""Ape-X's replay shards: a PrioritizedReplay per Ray actor, and what checkpoints keep of them."""

from __future__ import annotations

import functools
import os

import numpy as np
import ray
import tensorflow as tf
from tensorflow.python.saved_model.save_context import in_save_context

from batchrl.replay import PrioritizedReplay, transition_spec
from batchrl.runners.ray.actors import limit_threads
from batchrl.tools.environments import EnvSpaces


def item_spec(config) -> dict:
    """The spec of one transition in a shard: `transition_spec`, the version of the weights
    that acted (`version`) and the shard's count of items added before it (`added`)."""
    spaces = EnvSpaces(config.env, 1)
    observ = tf.TensorSpec(spaces.observation_space.shape, tf.as_dtype(config.dqn.observ_dtype))
    spec = transition_spec(observ, tf.TensorSpec([], tf.int32))
    spec["version"] = tf.TensorSpec([], tf.int32)
    spec["added"] = tf.TensorSpec([], tf.int64)
    return spec


class ShardBuffer:
    """One `PrioritizedReplay` of `capacity` transitions (ring order): what a `ReplayShard`
    holds and does, usable without Ray.

    `add` stamps each item with the count of items the shard took before it, so that a
    sample's age is the transitions added since (`sample`). The learner keeps several
    samples in flight while actors add, so the slots of a batch may be overwritten before
    its priorities come back: `sample` returns the slots' write counts, and
    `update_priorities` drops the updates of slots written since.
    """

    def __init__(self, capacity: int, spec, alpha: float, epsilon: float, seed: int):
        self._replay = PrioritizedReplay(
            capacity, spec, alpha, epsilon, seed=seed, count_writes=True
        )
        self._spec = spec
        self._added = 0
        self._add = tf.function(self._replay.add)
        # A function of its own, not a method: Ray adds a keyword to an actor's methods.
        self._sample = tf.function(functools.partial(sample_with_writes, self._replay))
        self._update = tf.function(self._replay.update_priorities)

    def add(self, block) -> int:
        """Adds a block from `ApexActor.collect` (the newest `capacity` of it); returns
        the shard's size after it."""
        items, priorities = block
        count = len(priorities)
        if count:
            items = dict(items, added=np.arange(self._added, self._added + count))
            keep = slice(max(count - self._replay.capacity, 0), count)
            items = {
                key: tf.constant(value[keep], self._spec[key].dtype) for key, value in items.items()
            }
            self._add(items, tf.constant(priorities[keep], tf.float32))
            self._added += count
        return self.size()

    def sample(self, batch_size: int, beta: float):
        """A prioritized batch: (indices [N], weights [N], items, ages [N], writes [N]),
        where an age is the transitions added to the shard since the item and `writes`
        the slots' write counts, for `update_priorities`; None while the shard holds
        fewer than `batch_size`."""
        if self.size() < batch_size:
            return None
        batch = self._sample(batch_size, tf.constant(beta, tf.float32))
        indices, weights, items, writes = tf.nest.map_structure(lambda x: x.numpy(), batch)
        ages = self._added - items["added"]
        return indices, weights, items, ages, writes

    def update_priorities(self, indices, priorities, writes=None) -> None:
        """Sets the priorities |delta| of a sampled batch's slots; with the `writes` its
        sample returned, those of slots written since are dropped (they hold other items)."""
        indices = tf.constant(indices, tf.int32)
        priorities = tf.constant(priorities, tf.float32)
        if writes is None:
            self._update(indices, priorities)
        else:
            self._update(indices, priorities, tf.constant(writes, tf.int64))

    def contents(self) -> dict[str, np.ndarray]:
        """Every item held, oldest first, with its raw priority |delta| (`priority`)."""
        indices = tf.range(self._replay.size())
        items = {key: value.numpy() for key, value in self._replay.ring.read(indices).items()}
        tree = self._replay.tree.get(indices).numpy()  # (|delta| + epsilon)^alpha
        alpha = self._replay.alpha or 1.0
        items["priority"] = np.maximum(tree ** (1.0 / alpha) - self._replay.epsilon, 0.0)
        order = np.argsort(items["added"], kind="stable")
        return {key: value[order] for key, value in items.items()}

    def priorities(self, indices) -> np.ndarray:
        """The tree's priorities (|delta| + epsilon)^alpha at `indices`, for tests."""
        return self._replay.tree.get(tf.constant(indices, tf.int32)).numpy()

    def size(self) -> int:
        return int(self._replay.size())


def sample_with_writes(replay: PrioritizedReplay, batch_size: int, beta: tf.Tensor) -> tuple:
    """`replay.sample(batch_size, beta)` and the sampled slots' write counts."""
    indices, weights, items = replay.sample(batch_size, beta)
    return indices, weights, items, replay.writes(indices)


@ray.remote(max_restarts=0)
class ReplayShard(ShardBuffer):
    """A Ray actor holding a `ShardBuffer`, its TensorFlow on one thread."""

    def __init__(self, capacity: int, spec, alpha: float, epsilon: float, seed: int):
        limit_threads(1)
        super().__init__(capacity, spec, alpha, epsilon, seed)

    def pid(self) -> int:
        return os.getpid()


class ShardContents(tf.Module):
    """What checkpoints save of the shards (`apex.checkpoint_shards`): every transition
    and its priority, fetched from the shards when a checkpoint is written, and handed to
    `RayApex.load` when one is restored (TensorFlow restores it when it is attached)."""

    def __init__(self, runner):
        super().__init__(name="apex_shards")
        self._runner = runner

    def _serialize_to_tensors(self):
        if in_save_context() or not tf.executing_eagerly():
            return {}  # An exported policy (SavedModel) holds no replay.
        return {key: tf.constant(value) for key, value in self._runner.contents().items()}

    def _restore_from_tensors(self, restored_tensors):
        if restored_tensors and tf.executing_eagerly():
            self._runner.load({key: value.numpy() for key, value in restored_tensors.items()})
        return tf.no_op()
