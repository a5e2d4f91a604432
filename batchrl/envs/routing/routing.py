"""The routing environment in TensorFlow ops: a batch of networks, in-graph and XLA-compilable."""

from __future__ import annotations

import gymnasium as gym
import tensorflow as tf

from batchrl.envs.routing.observation import DEMANDS, MAX_DEMAND, observation_space
from batchrl.envs.routing.topology import Topology, load_topology
from batchrl.tools.in_graph_env import InGraphEnv


class Routing(InGraphEnv):
    """A batch of B independent networks, each routing its own stream of demands.

    The semantics, observation and action are those of `RoutingEnv` (the Gymnasium
    reference, with which the parity tests compare it step for step): each network has
    its own link capacities, current demand and random stream. Besides the variables of
    `InGraphEnv` it holds:

        capacities   [B, L] float32  remaining capacity of each link
        demand       [B] float32     the current demand: 8, 32 or 64
        source       [B] int32       its source node
        destination  [B] int32       its destination node
        elapsed      [B] int32       steps since the last reset
        draws        [B] int32       demands drawn so far by each network
        streams      [B] int32       the stream each network draws from (its index)
        stream_seed  [] int32        the seed of the streams (`seed`)

    Demands: network i's d-th draw (d = draws[i]) is one `tf.random.stateless_uniform`
    integer in [0, 3 N (N - 1)) from a seed folded from (stream_seed, streams[i], d),
    which codes the demand size and the ordered pair; so a network's stream depends
    neither on the batch size nor on the others, nor on its actions. As in
    `ClassicControlEnv`, XLA draws other (equally reproducible) numbers than eager and
    graph execution. `restart_streams` rewinds the streams, and can make networks share
    one (common random numbers: networks on one stream, reset together, see the same
    demands in their first episodes whatever they do).

    Time limit: with `max_episode_steps > 0`, `truncated = elapsed >= max_episode_steps`,
    as Gymnasium's `TimeLimit`; 0 means none, as in the reference.
    """

    def __init__(
        self,
        batch_size: int,
        seed: int = 0,
        max_episode_steps: int = 0,
        topology: str | Topology = "nsfnet",
    ):
        """Builds the batch.

        Args:
          batch_size: the number of networks B.
          seed: the seed of the demand streams, in [0, 2**31).
          max_episode_steps: the time limit; 0 for none.
          topology: a `Topology`, or what `load_topology` loads ('nsfnet', 'geant2', a
            JSON file or a networkx graph).
        """
        if not isinstance(topology, Topology):
            topology = load_topology(topology)
        super().__init__(
            batch_size,
            observation_space(topology),
            gym.spaces.Discrete(topology.k),
            name="Routing",
        )
        if not 0 <= int(seed) < 2**31:
            raise ValueError(f"seed must be in [0, 2**31), got {seed}.")
        if int(max_episode_steps) < 0:
            raise ValueError(f"max_episode_steps must be 0 or positive, got {max_episode_steps}.")
        self.topology = topology
        self.max_episode_steps = int(max_episode_steps)
        self._incidence = tf.constant(topology.incidence)  # [N, N, K, L]
        self._demands = tf.constant(DEMANDS, tf.float32)  # [3]
        num_links = topology.num_links
        self.capacities = tf.Variable(
            tf.fill([batch_size, num_links], topology.capacity), trainable=False
        )
        self.demand = tf.Variable(tf.fill([batch_size], DEMANDS[0]), trainable=False)
        self.source = tf.Variable(tf.zeros([batch_size], tf.int32), trainable=False)
        self.destination = tf.Variable(tf.ones([batch_size], tf.int32), trainable=False)
        self.elapsed = tf.Variable(tf.zeros([batch_size], tf.int32), trainable=False)
        self.draws = tf.Variable(tf.zeros([batch_size], tf.int32), trainable=False)
        self.streams = tf.Variable(tf.range(batch_size), trainable=False)
        self.stream_seed = tf.Variable(int(seed), dtype=tf.int32, trainable=False)

    @property
    def seed(self) -> int:
        """The seed of the demand streams; setting it restarts every stream from the new seed."""
        return int(self.stream_seed.numpy())

    @seed.setter
    def seed(self, seed: int) -> None:
        self.restart_streams(seed)

    def restart_streams(self, seed: int | None = None, streams=None) -> None:
        """Rewinds every network's demand stream to its start (draws = 0).

        Args:
          seed: a new seed of the streams, in [0, 2**31); None keeps the current one.
          streams: int [B], the stream of each network; None keeps the current ones.
        """
        self.draws.assign(tf.zeros_like(self.draws))
        if seed is not None:
            if not 0 <= int(seed) < 2**31:
                raise ValueError(f"seed must be in [0, 2**31), got {seed}.")
            self.stream_seed.assign(int(seed))
        if streams is not None:
            streams = tf.convert_to_tensor(streams, tf.int32)
            if streams.shape != (self._batch_size,):
                raise ValueError(
                    f"streams has shape {streams.shape}; it needs one stream per network "
                    f"[{self._batch_size}]."
                )
            self.streams.assign(streams)

    def set_state(
        self,
        capacities: tf.Tensor,
        demand: tf.Tensor,
        source: tf.Tensor,
        destination: tf.Tensor,
        indices: tf.Tensor | None = None,
    ) -> None:
        """Overwrites the state of the networks at `indices` (all when None).

        Leaves the elapsed steps, the draw counters and the done flags alone, as
        `ClassicControlEnv.set_state` does; `observ` is updated to the new state.

        Args:
          capacities: float32 [K, L] (or [B, L] when `indices` is None).
          demand: float32 [K], the next demands.
          source: int32 [K], their sources.
          destination: int32 [K], their destinations, != source.
          indices: int32 [K] of batch indices.
        """
        if indices is None:
            indices = tf.range(self._batch_size)
        rows = tf.convert_to_tensor(indices, tf.int32)[:, None]
        self.capacities.scatter_nd_update(rows, tf.convert_to_tensor(capacities, tf.float32))
        self.demand.scatter_nd_update(rows, tf.convert_to_tensor(demand, tf.float32))
        self.source.scatter_nd_update(rows, tf.convert_to_tensor(source, tf.int32))
        self.destination.scatter_nd_update(rows, tf.convert_to_tensor(destination, tf.int32))
        self.observ.scatter_nd_update(rows, self._observ(rows[:, 0]))

    def _step(self, action):
        marks = self._path_marks(self.source, self.destination, self.demand)  # [B, K, L]
        debit = tf.gather(marks, action, batch_dims=1)  # [B, L]
        remaining = self.capacities - debit  # [B, L]
        accepted = tf.reduce_all(remaining >= 0, axis=1)  # [B]
        self.capacities.assign(tf.where(accepted[:, None], remaining, self.capacities))
        reward = tf.where(accepted, self.demand / MAX_DEMAND, 0.0)  # [B]
        demand, source, destination = self._draw(tf.range(self._batch_size))  # [B] each
        self.demand.assign(tf.where(accepted, demand, self.demand))
        self.source.assign(tf.where(accepted, source, self.source))
        self.destination.assign(tf.where(accepted, destination, self.destination))
        elapsed = self.elapsed + 1  # [B]
        self.elapsed.assign(elapsed)
        truncated = tf.logical_and(self.max_episode_steps > 0, elapsed >= self.max_episode_steps)
        return self._observ(tf.range(self._batch_size)), reward, ~accepted, truncated

    def _reset(self, indices):
        rows = indices[:, None]
        count = tf.shape(indices)[0]
        full = tf.fill([count, self.topology.num_links], self.topology.capacity)  # [K, L]
        self.capacities.scatter_nd_update(rows, full)
        demand, source, destination = self._draw(indices)  # [K] each
        self.demand.scatter_nd_update(rows, demand)
        self.source.scatter_nd_update(rows, source)
        self.destination.scatter_nd_update(rows, destination)
        self.elapsed.scatter_nd_update(rows, tf.zeros_like(indices))
        return self._observ(indices)

    def _observ(self, indices):
        """The observations [K, (K + 1) L + 3] of the networks at `indices` [K]."""
        demand = tf.gather(self.demand, indices)  # [K]
        source = tf.gather(self.source, indices)  # [K]
        destination = tf.gather(self.destination, indices)  # [K]
        marks = self._path_marks(source, destination, demand)  # [K, K_paths, L]
        count = tf.shape(indices)[0]
        pair = tf.cast(tf.stack([source, destination], 1), tf.float32)  # [K, 2]
        return tf.concat(
            [
                tf.gather(self.capacities, indices),
                tf.reshape(marks, [count, self.topology.k * self.topology.num_links]),
                demand[:, None],
                pair,
            ],
            1,
        )

    def _path_marks(self, source, destination, demand):
        """The demand on the links of each candidate path [K, K_paths, L]."""
        incidence = tf.gather_nd(self._incidence, tf.stack([source, destination], 1))
        return incidence * demand[:, None, None]

    def _draw(self, indices):
        """Draws the next demand, source and destination [K] of the networks at `indices`.

        One uniform integer x in [0, 3 N (N - 1)) per network codes the demand size
        x mod 3 and the ordered pair x div 3 = s (N - 1) + t', with t = t' + [t' >= s].
        """
        num_nodes = self.topology.num_nodes
        if indices.shape[0] == 0:  # XLA cannot trace map_fn over a static empty batch.
            empty = tf.zeros([0], tf.int32)
            return tf.zeros([0], tf.float32), empty, empty
        draws = tf.gather(self.draws, indices)  # [K]
        streams = tf.gather(self.streams, indices)  # [K]
        stream_seed = self.stream_seed.read_value()
        self.draws.scatter_nd_add(indices[:, None], tf.ones_like(indices))
        outcomes = len(DEMANDS) * num_nodes * (num_nodes - 1)

        def draw(stream_and_draw):
            seed = tf.stack([stream_seed, stream_and_draw[0]])
            seed = tf.random.experimental.stateless_fold_in(seed, stream_and_draw[1])
            return tf.random.stateless_uniform([], seed, 0, outcomes, tf.int32)

        code = tf.map_fn(
            draw, tf.stack([streams, draws], 1), fn_output_signature=tf.TensorSpec([], tf.int32)
        )  # [K]
        demand = tf.gather(self._demands, code % len(DEMANDS))
        pair = code // len(DEMANDS)
        source = pair // (num_nodes - 1)
        destination = pair % (num_nodes - 1)
        destination += tf.cast(destination >= source, tf.int32)
        return demand, source, destination
