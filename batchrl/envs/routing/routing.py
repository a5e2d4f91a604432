"""The routing environment in TensorFlow ops: a batch of networks, in-graph and XLA-compilable."""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import tensorflow as tf

from batchrl.config import ConfigError
from batchrl.envs.routing.observation import DEMANDS, MAX_DEMAND, observation_space
from batchrl.envs.routing.path_masks import PathMasks
from batchrl.envs.routing.topology import Topology, check_topology_source, load_topology
from batchrl.envs.routing.topology_set import TopologySet, make_topology_set
from batchrl.tools.in_graph_env import InGraphEnv


class Routing(InGraphEnv):
    """A batch of B independent networks, each routing its own stream of demands.

    The semantics, observation and action are those of `RoutingEnv` (the Gymnasium
    reference, with which the parity tests compare it step for step): each network has
    its own link capacities, current demand and random stream. Besides the variables of
    `InGraphEnv` it holds:

        capacities   [B, L] float32  remaining capacity of each link
        topology_index [B] int32     the network's topology in a mixed batch (else 0)
        demand       [B] float32     the current demand: 8, 32 or 64
        source       [B] int32       its source node
        destination  [B] int32       its destination node
        elapsed      [B] int32       steps since the last reset
        draws        [B] int32       demands drawn so far by each network
        streams      [B] int32       the stream each network draws from (its index)
        stream_seed  [] int32        the seed of the streams (`seed`)

    and `path_masks`, the `PathMasks` of its candidate paths: the observation is the state
    (see `observation_space`), and a policy reads the paths' links from there.

    Demands: network i's d-th draw (d = draws[i]) is one integer in [0, 3 N (N - 1)),
    `stream_hash(stream_seed, streams[i], d)` reduced mod 3 N (N - 1), which codes the
    demand size and the ordered pair; so a network's stream depends neither on the batch
    size nor on the others, nor on its actions, and eager, graph and XLA execution draw
    the same numbers. (Before 2026-11-27 each draw was a `tf.random.stateless_uniform`
    from a seed folded per network, other numbers.) `restart_streams` rewinds the
    streams, and can make networks share one (common random numbers: networks on one
    stream, reset together, see the same demands in their first episodes whatever they
    do).

    Time limit: with `max_episode_steps > 0`, `truncated = elapsed >= max_episode_steps`,
    as Gymnasium's `TimeLimit`; 0 means none, as in the reference.

    Mixed batches: given a list of topologies (a `TopologySet`), network i routes on
    topology `streams[i] mod T`, chosen when its episode starts. Every network is padded
    to the largest topology (see `TopologySet` for why), and its observation ends with
    its topology index (`observation_space`). Networks on one stream share a topology,
    so common random numbers pair networks of the same topology; with the default
    streams 0..B-1 the topologies take turns. A network of topology t sees exactly the
    demands, observations (on its own links) and rewards it would see in a batch of t
    alone on the same stream.
    """

    resets_by_mask = True

    @classmethod
    def check_config(cls, env) -> None:
        """Raises ConfigError unless `env.topologies` lists a mixed batch's topologies.

        Args:
          env: the `env` section of a config naming this environment (batchrl/Routing-v0).
        """
        topologies = list(env.topologies)
        if not topologies:
            raise ConfigError(
                f"env.id={env.id!r} routes a mixed batch: it needs a non-empty env.topologies "
                "list, e.g. [nsfnet, geant2]."
            )
        if env.eval_on_gymnasium:
            raise ConfigError(
                f"env.topologies={topologies} needs env.eval_on_gymnasium=false: mixed batches "
                "exist only in TensorFlow ops."
            )
        for i, source in enumerate(topologies):
            try:
                check_topology_source(source)
            except ValueError as error:
                raise ConfigError(f"env.topologies[{i}]={source!r}: {error}") from None

    def __init__(
        self,
        batch_size: int,
        seed: int = 0,
        max_episode_steps: int = 0,
        topology: str | Topology | Sequence[str | Topology] = "nsfnet",
    ):
        """Builds the batch.

        Args:
          batch_size: the number of networks B.
          seed: the seed of the demand streams, in [0, 2**31).
          max_episode_steps: the time limit; 0 for none.
          topology: a `Topology`, or what `load_topology` loads ('nsfnet', 'geant2', a
            JSON file or a networkx graph); or a list of them, or a `TopologySet`, for a
            mixed batch (also a list of one: its observations carry the index).
        """
        if isinstance(topology, TopologySet):
            padded = topology
        elif isinstance(topology, list | tuple):
            topology = padded = make_topology_set(topology)
        else:
            if not isinstance(topology, Topology):
                topology = load_topology(topology)
            padded = make_topology_set([topology])
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
        self.topology = topology  # A `Topology`, or the `TopologySet` of a mixed batch.
        self.mixed = isinstance(topology, TopologySet)
        self.max_episode_steps = int(max_episode_steps)
        self._num_topologies = len(padded)
        self.path_masks = PathMasks(padded)  # Of the candidate paths, for `_step`.
        self._full = tf.constant(padded.capacities[:, None] * padded.link_mask)  # [T, L]
        self._node_counts = tf.constant(padded.node_counts)  # [T]
        self._demands = tf.constant(DEMANDS, tf.float32)  # [3]
        self.capacities = tf.Variable(
            tf.fill([batch_size, padded.num_links], padded.capacity), trainable=False
        )
        self.topology_index = tf.Variable(tf.zeros([batch_size], tf.int32), trainable=False)
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
        topology_index: tf.Tensor | None = None,
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
          topology_index: int32 [K], their topologies in a mixed batch; None keeps them.
        """
        if indices is None:
            indices = tf.range(self._batch_size)
        rows = tf.convert_to_tensor(indices, tf.int32)[:, None]
        if topology_index is not None:
            index = tf.convert_to_tensor(topology_index, tf.int32)
            self.topology_index.scatter_nd_update(rows, index)
        self.capacities.scatter_nd_update(rows, tf.convert_to_tensor(capacities, tf.float32))
        self.demand.scatter_nd_update(rows, tf.convert_to_tensor(demand, tf.float32))
        self.source.scatter_nd_update(rows, tf.convert_to_tensor(source, tf.int32))
        self.destination.scatter_nd_update(rows, tf.convert_to_tensor(destination, tf.int32))
        self.observ.assign(self._observ())

    def _step(self, action):
        path = [self.topology_index, self.source, self.destination, action]
        debit = self.path_masks(tf.stack(path, 1)) * self.demand[:, None]  # [B, L]
        remaining = self.capacities - debit  # [B, L]
        accepted = tf.reduce_all(remaining >= 0, axis=1)  # [B]
        self.capacities.assign(tf.where(accepted[:, None], remaining, self.capacities))
        reward = tf.where(accepted, self.demand / MAX_DEMAND, 0.0)  # [B]
        demand, source, destination = self._draw()  # [B] each
        self.demand.assign(tf.where(accepted, demand, self.demand))
        self.source.assign(tf.where(accepted, source, self.source))
        self.destination.assign(tf.where(accepted, destination, self.destination))
        elapsed = self.elapsed + 1  # [B]
        self.elapsed.assign(elapsed)
        truncated = tf.logical_and(self.max_episode_steps > 0, elapsed >= self.max_episode_steps)
        return self._observ(), reward, ~accepted, truncated

    def _reset(self, indices):
        mask = tf.scatter_nd(indices[:, None], tf.ones_like(indices), [self._batch_size]) > 0
        return tf.gather(self._reset_where(mask), indices)

    def _reset_where(self, mask):
        """Starts new episodes where `mask` [B] is true, with selects over the whole batch
        (under XLA, cheaper than gathers and scatters by a dynamic number of indices)."""
        topology = tf.where(mask, self.streams % self._num_topologies, self.topology_index)
        self.topology_index.assign(topology)
        full = tf.gather(self._full, topology)  # [B, L]
        self.capacities.assign(tf.where(mask[:, None], full, self.capacities))
        demand, source, destination = self._draw(mask)  # [B] each
        self.demand.assign(tf.where(mask, demand, self.demand))
        self.source.assign(tf.where(mask, source, self.source))
        self.destination.assign(tf.where(mask, destination, self.destination))
        self.elapsed.assign(tf.where(mask, 0, self.elapsed))
        return self._observ()

    def _observ(self):
        """The observations [B, L + 3] (mixed: + 1) of the current state."""
        parts = [
            self.capacities.read_value(),
            self.demand[:, None],
            tf.cast(self.source, tf.float32)[:, None],
            tf.cast(self.destination, tf.float32)[:, None],
        ]
        if self.mixed:
            parts.append(tf.cast(self.topology_index, tf.float32)[:, None])
        return tf.concat(parts, 1)

    def _draw(self, mask=None):
        """Draws the next demand, source and destination [B] of every network, and counts
        the draw of those where `mask` [B] is true (of all when None): the step and the
        resets draw for the whole batch, without gathers or scatters.

        One uniform integer x in [0, 3 N (N - 1)) per network codes the demand size
        x mod 3 and the ordered pair x div 3 = s (N - 1) + t', with t = t' + [t' >= s];
        N is the network's own topology's. x is `stream_hash(stream_seed, stream, draw)`
        mod 3 N (N - 1), for the whole batch at once.
        """
        draws = self.draws.read_value()
        num_nodes = tf.gather(self._node_counts, self.topology_index)  # [B]
        count = tf.ones_like(draws) if mask is None else tf.cast(mask, tf.int32)
        self.draws.assign_add(count)
        outcomes = len(DEMANDS) * num_nodes * (num_nodes - 1)  # [B]
        bits = stream_hash(self.stream_seed.read_value(), self.streams, draws)  # [B] uint32
        code = tf.cast(tf.cast(bits, tf.int64) % tf.cast(outcomes, tf.int64), tf.int32)
        demand = tf.gather(self._demands, code % len(DEMANDS))
        pair = code // len(DEMANDS)
        source = pair // (num_nodes - 1)
        destination = pair % (num_nodes - 1)
        destination += tf.cast(destination >= source, tf.int32)
        return demand, source, destination


def mix32(x: tf.Tensor) -> tf.Tensor:
    """Chris Wellons' "lowbias32" integer hash (hash-prospector) of uint32 `x`, any shape.

    A bijection of the 32-bit integers whose output bits each flip with probability
    close to 1/2 when any one input bit flips; integer ops only, so eager, graph and
    XLA execution give the same numbers, and NumPy can repeat them.
    """
    x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 16))
    x = x * tf.constant(0x7FEB352D, tf.uint32)
    x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 15))
    x = x * tf.constant(0x846CA68B, tf.uint32)
    return tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 16))


def stream_hash(seed: tf.Tensor, stream: tf.Tensor, draw: tf.Tensor) -> tf.Tensor:
    """The uint32 [K] bits of each network's `draw`-th number on its `stream` (int32 [K]).

    mix32(mix32(mix32(seed + 0x9E3779B9) ^ stream) ^ draw): a counter-based generator, one
    number per (seed, stream, draw) and none shared, computed for the whole batch at
    once. TensorFlow's stateless draws take one seed per call, so a seed per network
    needed a loop over the batch (`tf.map_fn`), which cost up to half of a step at
    B = 4,096 (2026-11-27); hence this hash. Reduced mod M < 2**20 outcomes, each
    outcome's probability is off from 1 / M by under M / 2**32 of it.
    """
    u32 = lambda x: tf.cast(x, tf.uint32)  # noqa: E731 (Non-negative int32 in, exact.)
    bits = mix32(u32(seed) + tf.constant(0x9E3779B9, tf.uint32))
    bits = mix32(tf.bitwise.bitwise_xor(bits, u32(stream)))
    return mix32(tf.bitwise.bitwise_xor(bits, u32(draw)))
