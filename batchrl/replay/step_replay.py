"""n-step replay of B agents' steps in which each observation is stored once."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from batchrl.replay.n_step import NStep
from batchrl.replay.random_stream import RandomStream
from batchrl.replay.sum_tree import SumTree, as_indices

# Rounds of uniform rejection sampling before `sample` gives up on a draw (see `sample`).
_ROUNDS = 64


class StepReplay(tf.Module):
    """The n-step transitions of B agents, with each observation held in one slot.

        replay = StepReplay(capacity, observ_spec, action_spec, B, n, discount, seed=seed)
        for each step:                                  # inside the graph
            replay.push(observ, action, reward, terminated, truncated, next_observ)
        indices, weights, transition = replay.sample(batch_size, beta)
        replay.update_priorities(indices, td_errors)    # prioritized only
        replay.truncate(agent_indices)    # environments restarted mid-episode (a resume)

    A buffer of `UniformReplay` or `PrioritizedReplay` items stores each transition's
    observation and its next one, so every observation twice. Here agent j owns a column
    of C = capacity // B slots, written in order and wrapping around. A push writes the
    agent's observation at its cursor and the next observation in the slot after, where the
    next push's observation goes too, being the same one; after an episode end the slot
    after holds the episode's final observation, and the next episode starts in the slot
    after that. So a slot is either a step's (its observation, action and, once its
    n-step window is complete, its transition) or an episode's final observation.

    The transitions are `NStep`'s, with the slots of the observations in place of the
    observations: a step's transition records the slot of its bootstrap observation (the
    step m later in the column, or the final observation of an episode that ended within
    the window), and `sample` gathers both. A slot takes a transition when `NStep`
    completes the step's window (n - 1 pushes later), and loses it when the column wraps
    around to it; only slots holding one are sampled, uniformly (by rejection: uniform
    candidates in the filled part of the columns, drawn again where the slot holds no
    transition) or, with `prioritized`, in proportion to their priorities over a
    `SumTree` as in `PrioritizedReplay` (slots without a transition have priority 0).

    A full buffer holds C - 1 - n transitions per column, fewer by one per episode end
    in it. For 1,000,000 HalfCheetah transitions (17 float32 of observation, 6 of
    action) the variables take 105 MB against 168 MB for `UniformReplay`. Observations
    keep their dtype: uint8 frames stay uint8. Everything survives `tf.train.Checkpoint`
    (slots, cursors, the window, the tree, the random stream): after a restore the
    buffer samples what the saved one would have. Every method works eagerly, inside
    `tf.function` and under XLA, with static shapes; writes that a step does not make go
    to a spare slot past the columns, never through a `tf.cond`.
    """

    def __init__(
        self,
        capacity: int,
        observ_spec: Any,
        action_spec: Any,
        batch_size: int,
        n: int,
        discount: float,
        prioritized: bool = False,
        alpha: float = 0.6,
        epsilon: float = 1e-6,
        seed: int = 0,
        name: str = "step_replay",
    ):
        """Creates an empty buffer.

        Args:
          capacity: the slots, at least `batch_size` * (2n + 2); rounded down to a
            multiple of `batch_size`.
          observ_spec: a nested structure of fully defined `tf.TensorSpec`, one observation.
          action_spec: the same for one action.
          batch_size: the number of agents B, all pushed at every step.
          n: the most steps in an n-step window, at least 1.
          discount: gamma.
          prioritized: sample in proportion to priorities (`PrioritizedReplay`'s rule).
          alpha: the priorities' exponent, with `prioritized`.
          epsilon: added to every |delta| before the exponent; must be positive.
          seed: the seed of the sampling; part of the configuration, not of a checkpoint.
          name: name of the module.
        """
        super().__init__(name=name)
        columns = capacity // max(batch_size, 1)
        if batch_size < 1 or columns < 2 * n + 2:
            raise ValueError(
                f"capacity={capacity} must be at least batch_size * (2 n + 2) = "
                f"{max(batch_size, 1) * (2 * n + 2)} (batch_size={batch_size}, n={n})"
            )
        if epsilon <= 0:
            raise ValueError(f"epsilon must be positive, got {epsilon}")
        self.batch_size = int(batch_size)
        self.column = columns  # C
        self.capacity = self.batch_size * columns
        self.prioritized = bool(prioritized)
        self.alpha = float(alpha)
        self.epsilon = float(epsilon)
        spare = self.capacity  # The slot that writes a step does not make go to.
        slots = self.capacity + 1
        self._observ_spec = observ_spec
        self._action_spec = action_spec
        with self.name_scope:
            self.observ = [_zeros(slots, leaf) for leaf in tf.nest.flatten(observ_spec)]
            self.action = [_zeros(slots, leaf) for leaf in tf.nest.flatten(action_spec)]
            self.reward = _zeros(slots, tf.TensorSpec([], tf.float32))
            self.discount = _zeros(slots, tf.TensorSpec([], tf.float32))
            self.bootstrap = tf.Variable(tf.fill([slots], spare), trainable=False)
            self.holds = _zeros(slots, tf.TensorSpec([], tf.bool))  # a transition
            self.held = tf.Variable(0, trainable=False, name="held")  # count of `holds`
            self.cursor = tf.Variable(tf.zeros([batch_size], tf.int32), trainable=False)
            self.filled = tf.Variable(tf.zeros([batch_size], tf.int32), trainable=False)
            index = tf.TensorSpec([], tf.int32)
            self.window = NStep(n, discount, batch_size, {"observ": index, "action": action_spec})
            self.stream = RandomStream(seed)
            if self.prioritized:
                self.tree = SumTree(slots)
                self._max_priority = tf.Variable(1.0, trainable=False, name="max_priority")
        self._spare = spare

    def size(self) -> tf.Tensor:
        """The number of transitions held, an int32 scalar."""
        return self.held.read_value()

    def max_priority(self) -> tf.Tensor:
        """The largest |delta| + epsilon set so far (1 before any), before alpha."""
        if not self.prioritized:
            return tf.constant(1.0)
        return self._max_priority.read_value()

    def push(
        self,
        observ: Any,
        action: Any,
        reward: tf.Tensor,
        terminated: tf.Tensor,
        truncated: tf.Tensor,
        next_observ: Any,
    ) -> tf.Tensor:
        """Stores one step of every agent, and the transition its window completes.

        Args:
          observ: [B, ...], the observation the action was chosen for.
          action: [B, ...], the action taken.
          reward: float32 [B].
          terminated: bool [B], the step reached a terminal state.
          truncated: bool [B], the episode was cut short after the step.
          next_observ: [B, ...], the observation after the step (the final one when the
            episode ended).

        Returns:
          int32 [B], the slot of each transition completed, or `capacity` (the spare slot)
          during the first n - 1 pushes.
        """
        ended = tf.logical_or(terminated, truncated)  # [B]
        column = self.column
        start = tf.range(self.batch_size) * column  # [B], each agent's first slot
        here = start + self.cursor  # [B]
        after = start + (self.cursor + 1) % column  # [B]
        slots = tf.concat([here, after], 0)  # [2B]
        # Both slots take new observations: whatever transitions they held are gone.
        lost = tf.reduce_sum(tf.cast(tf.gather(self.holds, slots), tf.int32))
        for leaf, now, then in zip(
            self.observ, tf.nest.flatten(observ), tf.nest.flatten(next_observ)
        ):
            values = tf.concat([tf.cast(now, leaf.dtype), tf.cast(then, leaf.dtype)], 0)
            leaf.scatter_nd_update(slots[:, None], values)
        self.holds.scatter_nd_update(slots[:, None], tf.zeros([2 * self.batch_size], tf.bool))
        if self.prioritized:
            self.tree.set(slots, tf.zeros([2 * self.batch_size]))

        valid, transition = self.window.push(here, action, reward, terminated, truncated, after)
        done = tf.where(valid, transition["observ"], self._spare)[:, None]  # [B, 1]
        for leaf, value in zip(self.action, tf.nest.flatten(transition["action"])):
            leaf.scatter_nd_update(done, tf.cast(value, leaf.dtype))
        self.reward.scatter_nd_update(done, transition["reward"])
        self.discount.scatter_nd_update(done, transition["discount"])
        self.bootstrap.scatter_nd_update(done, transition["next_observ"])
        self.holds.scatter_nd_update(done, valid)
        if self.prioritized:
            initial = tf.pow(self._max_priority, self.alpha)
            self.tree.set(done[:, 0], tf.where(valid, initial, 0.0))
        self.held.assign_add(tf.reduce_sum(tf.cast(valid, tf.int32)) - lost)
        self.filled.assign(tf.maximum(self.filled, tf.minimum(self.cursor + 2, column)))
        self.cursor.assign((self.cursor + 1 + tf.cast(ended, tf.int32)) % column)
        return done[:, 0]

    def truncate(self, agent_indices: tf.Tensor) -> None:
        """Ends the episodes of `agent_indices` after their last step pushed, as if truncated.

        For agents whose environments were restarted without reporting an episode end (a
        run resumed on Gymnasium's environments): their windows stop at their last step
        (`NStep.truncate`), and, as after an episode end, their cursor skips the slot of
        that step's next observation, which stays the final observation those windows
        bootstrap from instead of taking the new episode's first one. Agents whose last
        step ended an episode, or that pushed none, keep their state.

        Args:
          agent_indices: int32 [K], the agents whose episodes begin anew.
        """
        agent_indices = tf.convert_to_tensor(agent_indices, tf.int32)  # [K]
        cut = self.window.truncate(agent_indices)  # [K]
        cursor = tf.gather(self.cursor, agent_indices) + tf.cast(cut, tf.int32)  # [K]
        self.cursor.scatter_nd_update(agent_indices[:, None], cursor % self.column)

    def sample(
        self, batch_size: int, beta: float | tf.Tensor = 0.0
    ) -> tuple[tf.Tensor, tf.Tensor, dict[str, Any]]:
        """Draws `batch_size` transitions, uniformly or by priority, with replacement.

        Uniformly: candidates are uniform over the columns' first max(filled) slots, and
        the ones on a slot without a transition are drawn again, up to 64 rounds; so the
        draw is exactly uniform over the transitions held. Once the buffer holds a batch,
        at most n + 1 slots per column, plus one per episode end, lack one, so a round
        rejects few; a candidate still rejected after 64 rounds (probability below 2^-64
        when at most half the slots lack one) takes the spare slot, a transition of zeros.
        From an empty buffer, eagerly this raises ValueError; in a graph it returns the
        spare slot.

        Args:
          batch_size: the number of transitions N, a Python int.
          beta: the importance exponent, with `prioritized`; ignored otherwise.

        Returns:
          indices: int32 [N], slots (for `update_priorities`).
          weights: float32 [N], importance weights in (0, 1] (`PrioritizedReplay`'s), or
            ones.
          transition: {"observ", "action", "reward", "discount", "next_observ"}, [N, ...].
        """
        if tf.executing_eagerly() and self.size() == 0:
            raise ValueError(f"{self.name}: sample from an empty buffer")
        if self.prioritized:
            indices, weights = self._sample_by_priority(batch_size, beta)
        else:
            indices, weights = self._sample_uniformly(batch_size), tf.ones([batch_size])
        return indices, weights, self.read(indices)

    def read(self, indices: tf.Tensor) -> dict[str, Any]:
        """The transitions at slots `indices` [N], as `sample` returns them."""

        def gather(leaves, spec, at):
            return tf.nest.pack_sequence_as(spec, [tf.gather(leaf, at) for leaf in leaves])

        return {
            "observ": gather(self.observ, self._observ_spec, indices),
            "action": gather(self.action, self._action_spec, indices),
            "reward": tf.gather(self.reward, indices),
            "discount": tf.gather(self.discount, indices),
            "next_observ": gather(
                self.observ, self._observ_spec, tf.gather(self.bootstrap, indices)
            ),
        }

    def update_priorities(self, indices: tf.Tensor, priorities: tf.Tensor) -> None:
        """Sets the raw priorities delta of the transitions at `indices` (prioritized only;
        does nothing otherwise), as `PrioritizedReplay.update_priorities` does."""
        if not self.prioritized:
            return
        indices = as_indices(indices)  # [K]
        raw = tf.abs(tf.convert_to_tensor(priorities, tf.float32)) + self.epsilon  # [K]
        self._max_priority.assign(tf.maximum(self._max_priority, tf.reduce_max(raw)))
        # A slot without a transition keeps priority 0.
        held = tf.gather(self.holds, indices)  # [K]
        self.tree.set(indices, tf.where(held, tf.pow(raw, self.alpha), 0.0))

    def _sample_uniformly(self, batch_size: int) -> tf.Tensor:
        rows = tf.reduce_max(self.filled)  # the slots in use in the fullest column
        candidates = tf.cast(self.batch_size * rows, tf.float64)

        def draw():
            uniform = self.stream.uniform([batch_size], tf.float64)  # [N]
            flat = tf.cast(tf.floor(uniform * candidates), tf.int32)  # [N]
            flat = tf.clip_by_value(flat, 0, tf.maximum(self.batch_size * rows - 1, 0))
            return flat // tf.maximum(rows, 1) * self.column + flat % tf.maximum(rows, 1)

        def redraw(round_, slots):
            held = tf.gather(self.holds, slots)
            return round_ + 1, tf.where(held, slots, draw())

        def missing(round_, slots):
            return (round_ < _ROUNDS) & ~tf.reduce_all(tf.gather(self.holds, slots))

        _, slots = tf.while_loop(missing, redraw, (tf.constant(1), draw()), parallel_iterations=1)
        return tf.where(tf.gather(self.holds, slots), slots, self._spare)

    def _sample_by_priority(self, batch_size, beta):
        """`PrioritizedReplay.sample`'s stratified draw and importance weights."""
        size = tf.cast(self.size(), tf.float32)
        uniform = self.stream.uniform([batch_size])  # [N]
        total = self.tree.total()
        points = (tf.range(batch_size, dtype=tf.float32) + uniform) * (total / batch_size)
        indices = self.tree.find(points)  # [N]
        probability = self.tree.get(indices) / tf.maximum(total, 1e-30)  # [N]
        beta = tf.convert_to_tensor(beta, tf.float32)
        weights = tf.pow(tf.maximum(size * probability, 1e-30), -beta)  # [N]
        weights = tf.where(size > 0, weights / tf.reduce_max(weights), tf.ones_like(weights))
        return indices, weights


def _zeros(slots: int, spec: tf.TensorSpec) -> tf.Variable:
    if not spec.shape.is_fully_defined():
        raise ValueError(f"the spec's shape must be fully defined, got {spec.shape}")
    return tf.Variable(tf.zeros([slots, *spec.shape], spec.dtype), trainable=False)
