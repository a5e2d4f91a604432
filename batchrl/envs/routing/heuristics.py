"""Baseline routing policies: shortest available path, load balancing, widest, shortest, random."""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from batchrl.core import Algorithm
from batchrl.envs.routing.observation import split_observ
from batchrl.envs.routing.path_masks import PathMasks
from batchrl.envs.routing.topology import Topology
from batchrl.envs.routing.topology_set import TopologySet, resolve_topology


def path_masks(topology: str | Topology | TopologySet | Sequence) -> PathMasks:
    """The `PathMasks` of a topology: a `Topology`, what `load_topology` loads, or a list
    of them (or a `TopologySet`) for a mixed batch."""
    return PathMasks(resolve_topology(topology))


def _split(observ: tf.Tensor, masks: PathMasks):
    """The observations' parts, and the demand on each candidate path's links [B, K, L]."""
    parts = split_observ(tf.convert_to_tensor(observ, tf.float32), masks.num_links)
    return parts, masks.marks(parts)


def feasible_paths(observ: tf.Tensor, masks: PathMasks) -> tf.Tensor:
    """Whether each candidate path has at least the demand left on every link.

    Args:
      observ: observations [B, L + 3] (see `observation_space`).
      masks: the `PathMasks` of the topology (`path_masks`).

    Returns:
      bool [B, K].
    """
    parts, marks = _split(observ, masks)
    # Off the path the mark is 0 and every capacity is >= 0.
    return tf.reduce_all(parts.capacities[:, None, :] >= marks, axis=-1)


def shortest_available_path(observ: tf.Tensor, masks: PathMasks) -> tf.Tensor:
    """SAP: the first candidate path (fewest hops first) that is feasible, else path 0.

    As DRL-GNN's evaluate_DQN.py. On this environment it scores 26.41 +- 0.15 on NSFNET
    and 22.69 +- 0.19 on GEANT2 over 1,000 first episodes (bench/routing_heuristics.py,
    the demand streams of 2026-11-27); the paper's code, 26.6 and 22.2.

    Returns:
      int32 actions [B].
    """
    return _first(feasible_paths(observ, masks))


def load_balancing(observ: tf.Tensor, noise: tf.Tensor, masks: PathMasks) -> tf.Tensor:
    """LB as DRL-GNN's evaluate_DQN.py defines it: a uniform feasible path, else path 0.

    With two or more feasible candidates it picks one of them uniformly at random; with
    one, that one; with none, path 0.

    Args:
      observ: observations [B, L + 3].
      noise: U[0, 1) [B] that picks among the feasible paths.
      masks: the `PathMasks` of the topology.

    Returns:
      int32 actions [B].
    """
    feasible = feasible_paths(observ, masks)  # [B, K]
    count = tf.reduce_sum(tf.cast(feasible, tf.int32), axis=1)  # [B]
    choice = tf.cast(tf.floor(noise * tf.cast(count, tf.float32)), tf.int32)  # [B]
    choice = tf.minimum(choice, tf.maximum(count - 1, 0))
    rank = tf.cumsum(tf.cast(feasible, tf.int32), axis=1, exclusive=True)  # [B, K]
    return _first(feasible & (rank == choice[:, None]))


def widest_path(observ: tf.Tensor, masks: PathMasks) -> tf.Tensor:
    """The candidate whose fullest link keeps the most capacity after the allocation.

    Scores each path by min over its links of (capacity - demand) and picks the highest,
    the first on ties; an infeasible path scores below every feasible one. (This is a
    load-balancing rule too, but not the one DRL-GNN names LB: see `load_balancing`.)

    Returns:
      int32 actions [B].
    """
    parts, marks = _split(observ, masks)
    residual = parts.capacities[:, None, :] - marks  # [B, K, L]
    residual = tf.where(marks > 0, residual, float("inf"))
    bottleneck = tf.reduce_min(residual, axis=-1)  # [B, K]
    return _first(bottleneck == tf.reduce_max(bottleneck, axis=-1, keepdims=True))


def always_shortest(observ: tf.Tensor, masks: PathMasks) -> tf.Tensor:
    """Candidate 0, the path with the fewest hops, whatever the load.

    Returns:
      int32 actions [B].
    """
    del masks
    return tf.zeros(tf.shape(observ)[:1], tf.int32)


def uniform_random(observ: tf.Tensor, noise: tf.Tensor, masks: PathMasks) -> tf.Tensor:
    """A uniform candidate path.

    Args:
      observ: observations [B, L + 3]; only the batch size is read.
      noise: U[0, 1) [B].
      masks: the `PathMasks` of the topology; only its K is read.

    Returns:
      int32 actions [B].
    """
    del observ
    k = masks.k
    return tf.minimum(tf.cast(tf.floor(noise * k), tf.int32), k - 1)


def _first(mask: tf.Tensor) -> tf.Tensor:
    """The index int32 [B] of the first true entry of each row of `mask` [B, K]; 0 if none."""
    k = tf.shape(mask)[1]
    first = tf.reduce_min(tf.where(mask, tf.range(k)[None], k), axis=1)  # [B]
    return tf.where(first == k, 0, first)


HEURISTICS = {  # (observ [B, L + 3], noise [B], masks) -> actions [B]
    "sap": lambda observ, noise, masks: shortest_available_path(observ, masks),
    "load_balancing": load_balancing,
    "widest": lambda observ, noise, masks: widest_path(observ, masks),
    "shortest": lambda observ, noise, masks: always_shortest(observ, masks),
    "random": uniform_random,
}


class Heuristic(Algorithm):
    """Acts with one of the `HEURISTICS`; learns nothing. Runs in `simulate`, also with XLA.

    The random ones draw their noise from a `tf.random.Generator` seeded with `seed`.
    """

    def __init__(
        self,
        heuristic: str,
        topology: str | Topology | TopologySet | Sequence = "nsfnet",
        seed: int = 0,
    ):
        """Builds the policy.

        Args:
          heuristic: one of 'sap', 'load_balancing', 'widest', 'shortest', 'random'.
          topology: the environment's: a `Topology`, what `load_topology` loads
            ('nsfnet', 'geant2', ...), or a list of them for a mixed batch; the
            observations hold the state only, and the heuristic reads the candidate
            paths' links from the topology.
          seed: the seed of the noise of 'load_balancing' and 'random'.
        """
        super().__init__(name=f"heuristic_{heuristic}")
        if heuristic not in HEURISTICS:
            raise ValueError(
                f"Unknown heuristic {heuristic!r}; valid choices are {list(HEURISTICS)}."
            )
        self.heuristic = heuristic
        self._policy = HEURISTICS[heuristic]
        self.masks = path_masks(topology)
        self._rng = tf.random.Generator.from_seed(seed)

    def begin_episodes(self, agent_indices):
        pass

    def perform(self, agent_indices, observ):
        noise = self._rng.uniform(tf.shape(agent_indices))  # [B]
        return self._policy(observ, noise, self.masks)

    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        pass

    def end_episodes(self, agent_indices):
        pass
