"""Baseline routing policies: shortest available path, load balancing, widest, shortest, random."""

from __future__ import annotations

import tensorflow as tf

from batchrl.core import Algorithm
from batchrl.envs.routing.observation import split_observ
from batchrl.envs.routing.topology import K


def feasible_paths(observ: tf.Tensor, k: int = K) -> tf.Tensor:
    """Whether each candidate path has at least the demand left on every link.

    Args:
      observ: observations [B, (K + 1) L + 3] (see `observation_space`).
      k: K, the number of candidate paths.

    Returns:
      bool [B, K].
    """
    parts = split_observ(tf.convert_to_tensor(observ, tf.float32), k)
    # Off the path the mark is 0 and every capacity is >= 0.
    return tf.reduce_all(parts.capacities[:, None, :] >= parts.path_marks, axis=-1)


def shortest_available_path(observ: tf.Tensor, k: int = K) -> tf.Tensor:
    """SAP: the first candidate path (fewest hops first) that is feasible, else path 0.

    As DRL-GNN's evaluate_DQN.py. On this environment it scores 26.56 on NSFNET and 22.57
    on GEANT2 (bench/routing_heuristics.py, 300 fixed episodes).

    Returns:
      int32 actions [B].
    """
    return _first(feasible_paths(observ, k))


def load_balancing(observ: tf.Tensor, noise: tf.Tensor, k: int = K) -> tf.Tensor:
    """LB as DRL-GNN's evaluate_DQN.py defines it: a uniform feasible path, else path 0.

    With two or more feasible candidates it picks one of them uniformly at random; with
    one, that one; with none, path 0.

    Args:
      observ: observations [B, (K + 1) L + 3].
      noise: U[0, 1) [B] that picks among the feasible paths.
      k: K, the number of candidate paths.

    Returns:
      int32 actions [B].
    """
    feasible = feasible_paths(observ, k)  # [B, K]
    count = tf.reduce_sum(tf.cast(feasible, tf.int32), axis=1)  # [B]
    choice = tf.cast(tf.floor(noise * tf.cast(count, tf.float32)), tf.int32)  # [B]
    choice = tf.minimum(choice, tf.maximum(count - 1, 0))
    rank = tf.cumsum(tf.cast(feasible, tf.int32), axis=1, exclusive=True)  # [B, K]
    return _first(feasible & (rank == choice[:, None]))


def widest_path(observ: tf.Tensor, k: int = K) -> tf.Tensor:
    """The candidate whose fullest link keeps the most capacity after the allocation.

    Scores each path by min over its links of (capacity - demand) and picks the highest,
    the first on ties; an infeasible path scores below every feasible one. (This is a
    load-balancing rule too, but not the one DRL-GNN names LB: see `load_balancing`.)

    Returns:
      int32 actions [B].
    """
    parts = split_observ(tf.convert_to_tensor(observ, tf.float32), k)
    residual = parts.capacities[:, None, :] - parts.path_marks  # [B, K, L]
    residual = tf.where(parts.path_marks > 0, residual, float("inf"))
    bottleneck = tf.reduce_min(residual, axis=-1)  # [B, K]
    return _first(bottleneck == tf.reduce_max(bottleneck, axis=-1, keepdims=True))


def always_shortest(observ: tf.Tensor, k: int = K) -> tf.Tensor:
    """Candidate 0, the path with the fewest hops, whatever the load.

    Returns:
      int32 actions [B].
    """
    del k
    return tf.zeros(tf.shape(observ)[:1], tf.int32)


def uniform_random(observ: tf.Tensor, noise: tf.Tensor, k: int = K) -> tf.Tensor:
    """A uniform candidate path.

    Args:
      observ: observations [B, (K + 1) L + 3]; only the batch size is read.
      noise: U[0, 1) [B].
      k: K, the number of candidate paths.

    Returns:
      int32 actions [B].
    """
    del observ
    return tf.minimum(tf.cast(tf.floor(noise * k), tf.int32), k - 1)


def _first(mask: tf.Tensor) -> tf.Tensor:
    """The index int32 [B] of the first true entry of each row of `mask` [B, K]; 0 if none."""
    k = tf.shape(mask)[1]
    first = tf.reduce_min(tf.where(mask, tf.range(k)[None], k), axis=1)  # [B]
    return tf.where(first == k, 0, first)


HEURISTICS = {
    "sap": lambda observ, noise, k: shortest_available_path(observ, k),
    "load_balancing": load_balancing,
    "widest": lambda observ, noise, k: widest_path(observ, k),
    "shortest": lambda observ, noise, k: always_shortest(observ, k),
    "random": uniform_random,
}


class Heuristic(Algorithm):
    """Acts with one of the `HEURISTICS`; learns nothing. Runs in `simulate`, also with XLA.

    The random ones draw their noise from a `tf.random.Generator` seeded with `seed`.
    """

    def __init__(self, heuristic: str, k: int = K, seed: int = 0):
        """Builds the policy.

        Args:
          heuristic: one of 'sap', 'load_balancing', 'widest', 'shortest', 'random'.
          k: K, the number of candidate paths.
          seed: the seed of the noise of 'load_balancing' and 'random'.
        """
        super().__init__(name=f"heuristic_{heuristic}")
        if heuristic not in HEURISTICS:
            raise ValueError(
                f"Unknown heuristic {heuristic!r}; valid choices are {list(HEURISTICS)}."
            )
        self.heuristic = heuristic
        self._policy = HEURISTICS[heuristic]
        self._k = k
        self._rng = tf.random.Generator.from_seed(seed)

    def begin_episodes(self, agent_indices):
        pass

    def perform(self, agent_indices, observ):
        noise = self._rng.uniform(tf.shape(agent_indices))  # [B]
        return self._policy(observ, noise, self._k)

    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        pass

    def end_episodes(self, agent_indices):
        pass
