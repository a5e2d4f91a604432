"""The state, time limit and seeded resets shared by the in-graph classic-control ports."""

from __future__ import annotations

import abc
from collections.abc import Sequence

import gymnasium as gym
import tensorflow as tf

from batchrl.parts.untracked import Untracked
from batchrl.tools.in_graph_env import InGraphEnv


class ClassicControlEnv(InGraphEnv):
    """A batch of B environments whose dynamics is a function of a float32 state vector.

    Subclasses port one Gymnasium classic-control environment by implementing
    `_dynamics`, `_observ` and `_initial_state` in TensorFlow ops; this class keeps the
    state, applies the time limit and draws reproducible initial states. Besides the
    variables of `InGraphEnv` it holds:

        state     [B, S] float32  laid out as Gymnasium's `env.unwrapped.state`
        elapsed   [B] int32       steps since the last reset, as TimeLimit's `_elapsed_steps`
        episodes  [B] int32       resets so far of each environment

    Time limit: `truncated = elapsed >= max_episode_steps`, whatever `terminated` says, as
    in Gymnasium's `TimeLimit`; both are true when an episode reaches a terminal state at
    the last allowed step.

    Initial states: environment i's k-th reset (k = episodes[i]) draws its noise from
    Philox with the seed as key and (i, k) as counter, so it does not depend on which
    other environments reset with it or on the batch size. TensorFlow's
    XLA kernels implement the stateless generators differently from its eager and graph
    kernels, so under `jit_compile=True` the draws are reproducible but not the same
    numbers as eagerly; the dynamics agree in both.

    Members: after `set_members(M)`, the batch is M blocks of B / M environments, block m
    drawing as a batch of B / M seeded `seed + m` would (key `seed + m`, counter (i mod
    B / M, k)): the environments of a population of M agents (`train.population`).

    State, observations and rewards are float32. The dynamics compute in float32 unless a
    subclass says otherwise, where Gymnasium mostly uses float64; one step agrees with
    Gymnasium to float32 rounding (rtol = atol = 1e-5 in the tests).
    """

    _noise_size: int  # How many U[0, 1) numbers `_initial_state` needs per environment.
    autograph = False  # The ports write their control flow in TensorFlow ops.

    def __init__(
        self,
        batch_size: int,
        seed: int,
        max_episode_steps: int,
        state_size: int,
        observation_space: gym.Space,
        action_space: gym.Space,
        name: str | None = None,
    ):
        super().__init__(batch_size, observation_space, action_space, name=name)
        if int(max_episode_steps) <= 0:
            raise ValueError(f"max_episode_steps must be positive, got {max_episode_steps}.")
        # A variable, not a constant in the graph: XLA's persistent compilation cache then
        # serves one program for every seed. Outside checkpoints: the config sets it.
        if not 0 <= int(seed) < 2**31:
            raise ValueError(f"seed must be in [0, 2**31), got {seed}.")
        self._seed = Untracked({"seed": tf.Variable(int(seed), trainable=False, name="seed")})
        self.members = 1  # Blocks of environments with seeds seed, seed + 1, ...
        self._offsets = None  # Or block m's seed less `seed`, if not m.
        self.max_episode_steps = int(max_episode_steps)
        self.state = tf.Variable(tf.zeros([batch_size, state_size], tf.float32), trainable=False)
        self.elapsed = tf.Variable(tf.zeros([batch_size], tf.int32), trainable=False)
        self.episodes = tf.Variable(tf.zeros([batch_size], tf.int32), trainable=False)

    @property
    def seed(self) -> int:
        """The seed of the initial-state streams, in [0, 2**31); settable, also after tracing.

        Setting it restarts every stream from the new seed: the episode counters, which
        number the draws, go back to zero.
        """
        return int(self._seed.variables["seed"].numpy())

    @seed.setter
    def seed(self, seed: int) -> None:
        if not 0 <= int(seed) < 2**31:
            raise ValueError(f"seed must be in [0, 2**31), got {seed}.")
        self._seed.variables["seed"].assign(int(seed))
        self.episodes.assign(tf.zeros_like(self.episodes))

    def set_members(self, members: int, offsets: Sequence[int] | None = None) -> None:
        """Splits the batch into `members` blocks whose streams are seeded seed, seed + 1, ...

        Call it before the first reset (before tracing); `seed` then stays the first
        block's seed, and setting it moves every block's.

        Args:
          members: the number of blocks M.
          offsets: block m's streams are seeded `seed + offsets[m]` (default m), for
            members whose seeds are listed (`train.seeds`).

        Raises:
          ValueError: `members` does not divide the batch size, or `offsets` are not M.
        """
        if members < 1 or len(self) % members:
            raise ValueError(f"{members} members cannot split a batch of {len(self)}.")
        if offsets is not None and len(offsets) != members:
            raise ValueError(f"{len(offsets)} seed offsets for {members} members.")
        self.members = int(members)
        self._offsets = None if offsets is None else [int(x) for x in offsets]

    def set_state(self, state: tf.Tensor, indices: tf.Tensor | None = None) -> None:
        """Overwrites the physical state of the environments at `indices` (all when None).

        Like assigning `env.unwrapped.state` in Gymnasium, this leaves the elapsed steps,
        the episode counters and the done flags alone, so a test can drive an episode
        into its time limit from any state. `observ` is updated to the new state.

        Args:
          state: float32 Tensor [K, S], or [B, S] when `indices` is None.
          indices: int32 Tensor [K] of batch indices.
        """
        state = tf.convert_to_tensor(state, tf.float32)
        if indices is None:
            self.state.assign(state)
            self.observ.assign(self._observ(state))
            return
        rows = tf.convert_to_tensor(indices, tf.int32)[:, None]
        self.state.scatter_nd_update(rows, state)
        self.observ.scatter_nd_update(rows, self._observ(state))

    def _step(self, action: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
        state, reward, terminated = self._dynamics(self.state.read_value(), action)
        self.state.assign(state)
        elapsed = self.elapsed + 1  # [B]
        self.elapsed.assign(elapsed)
        truncated = elapsed >= self.max_episode_steps  # [B]
        return self._observ(state), reward, terminated, truncated

    def _reset(self, indices: tf.Tensor) -> tf.Tensor:
        uniform = self._uniform(indices, self._noise_size)  # [K, N]
        state = self._initial_state(uniform)  # [K, S]
        rows = indices[:, None]
        self.state.scatter_nd_update(rows, state)
        self.elapsed.scatter_nd_update(rows, tf.zeros_like(indices))
        self.episodes.scatter_nd_add(rows, tf.ones_like(indices))
        return self._observ(state)

    def _uniform(self, indices: tf.Tensor, size: int) -> tf.Tensor:
        """Draws U[0, 1) noise [K, size] for the next episode of each environment in `indices`."""
        if indices.shape[0] == 0:  # XLA cannot trace map_fn over a static empty batch.
            return tf.zeros([0, size], tf.float32)
        episodes = tf.gather(self.episodes, indices)  # [K]

        # Philox is counter-based: the seed is its key and (environment, episode) numbers the
        # stream in the counter's high word, so nothing hashes a seed. `stateless_fold_in`
        # and `stateless_uniform` each hash theirs with a Philox evaluation that XLA copies
        # into several kernels, which made the training call's compile 0.4 s longer on
        # cartpole_tf (docs/lab-log.md, 2026-11-25, commit bc49931).
        seed = tf.cast(self._seed.variables["seed"], tf.uint64)
        per_member = len(self) // self.members
        offsets = None  # uint64 arithmetic wraps: seed + (2**64 - k) is seed - k.
        if self._offsets is not None:
            offsets = tf.cast(tf.constant(self._offsets, tf.int64), tf.uint64)  # [M]

        def draw(index_and_episode):
            index, episode = index_and_episode[0], index_and_episode[1]
            # Environment i of the batch is environment i mod B/M of member i // (B/M).
            member = tf.cast(index // per_member, tf.uint64)
            if offsets is not None:
                member = tf.gather(offsets, index // per_member)
            stream = tf.cast(index % per_member, tf.uint64) * 2**32 + tf.cast(episode, tf.uint64)
            key = tf.reshape(seed + member, [1])
            counter = tf.stack([tf.constant(0, tf.uint64), stream])
            return tf.raw_ops.StatelessRandomUniformV2(
                shape=[size], key=key, counter=counter, alg=tf.random.Algorithm.PHILOX.value
            )

        return tf.map_fn(
            draw,
            tf.stack([indices, episodes], 1),
            fn_output_signature=tf.TensorSpec([size], tf.float32),
        )

    @abc.abstractmethod
    def _initial_state(self, uniform: tf.Tensor) -> tf.Tensor:
        """Maps U[0, 1) noise [K, N] to initial states [K, S]."""

    @abc.abstractmethod
    def _dynamics(
        self, state: tf.Tensor, action: tf.Tensor
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """Returns next state [B, S], reward [B] float32 and terminated [B] bool."""

    @abc.abstractmethod
    def _observ(self, state: tf.Tensor) -> tf.Tensor:
        """Returns the observations [K, ...] float32 of states [K, S]."""
