"""n-step transitions: returns over a [T, B] block, and an accumulator for B agents."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow as tf


def n_step_returns(
    rewards: tf.Tensor,
    terminated: tf.Tensor,
    truncated: tf.Tensor,
    discount: float,
    n: int,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The n-step return of every step of a time-major block, cut at episode ends.

    The window of step t holds steps t, t+1, ... up to n of them, and stops after the first
    one that is terminated or truncated, so it never crosses into the agent's next
    episode. With m steps in it,

        R_t = sum_{k=0}^{m-1} gamma^k r_{t+k},
        discount_t = 0 if step t+m-1 is terminated, else gamma^m,

    and the target is R_t + discount_t * V(next_observ_{t+m-1}): the observation after
    the window's last step, the episode's final one when it ended (`Algorithm.experience`
    receives it as `next_observ`), else observ_{t+m}. A window that would run past the
    block is cut at T as if truncated there (m = T - t), so it bootstraps.

    Args:
      rewards: float32 [T, B].
      terminated: bool [T, B], the step reached a terminal state.
      truncated: bool [T, B], the episode was cut short after the step.
      discount: gamma.
      n: the most steps in a window, at least 1.

    Returns:
      returns: float32 [T, B], R_t.
      discounts: float32 [T, B], discount_t.
      bootstrap_offsets: int32 [T, B], m: the bootstrap observation is next_observ[t + m - 1].
    """
    rewards = tf.convert_to_tensor(rewards, tf.float32)  # [T, B]
    terminated = tf.convert_to_tensor(terminated, tf.bool)  # [T, B]
    truncated = tf.convert_to_tensor(truncated, tf.bool)  # [T, B]
    length = tf.shape(rewards)[0]

    def ahead(value, k):
        """value[t + k] at row t; zeros (False) beyond the block."""
        padding = [[0, n]] + [[0, 0]] * (value.shape.rank - 1)
        return tf.pad(value, padding)[k : k + length]  # [T, B]

    inside = tf.ones_like(terminated)  # [T, B]
    return _windows(
        [ahead(rewards, k) for k in range(n)],
        [ahead(terminated, k) for k in range(n)],
        [ahead(truncated, k) for k in range(n)],
        [ahead(inside, k) for k in range(n)],
        discount,
    )


def transition_spec(observ: Any, action: Any) -> dict[str, Any]:
    """The spec of one transition as `NStep.push` emits it, for the replay buffer.

    Args:
      observ: the spec (nested structure of `tf.TensorSpec`) of one observation.
      action: the spec of one action.

    Returns:
      {"observ", "action", "reward", "discount", "next_observ"}.
    """
    scalar = tf.TensorSpec([], tf.float32)
    return {
        "observ": observ,
        "action": action,
        "reward": scalar,
        "discount": scalar,
        "next_observ": observ,
    }


class NStep(tf.Module):
    """Turns the steps of B agents, pushed together, into n-step transitions.

        n_step = NStep(n, discount, B, {"observ": observ_spec, "action": action_spec})
        for each step:                             # inside the graph
            valid, transition = n_step.push(observ, action, reward, terminated,
                                            truncated, next_observ)   # [B, ...] each
            replay.add(transition)                 # once valid (for all agents at once)

    Each agent keeps its last n steps in a ring. Each push stores a step and emits, for
    every agent, the transition of the step pushed n-1 pushes before (`valid` is false
    during the first n-1 pushes, whose transitions are made of empty slots):

        {"observ", "action"}: of that step t;
        "reward": R_t, its n-step return; "discount": 0 or gamma^m;
        "next_observ": the observation to bootstrap from, next_observ of step t+m-1,

    with the window rules of `n_step_returns`: it stops at the first terminated or
    truncated step of the agent, so it never mixes episodes. A step whose window an episode
    end cuts short is still emitted only once its n-1 successors are in, so every push after
    the first n-1 emits exactly one transition per agent: fixed shapes for XLA. The last
    n-1 steps of a run are never emitted. With n = 1 a push emits its own step, with
    discount gamma * (1 - terminated). `truncate` ends an agent's episode where its
    environment restarted without saying so (a resume on Gymnasium's environments).

    The rings and the push count survive `tf.train.Checkpoint`.
    """

    def __init__(
        self,
        n: int,
        discount: float,
        batch_size: int,
        spec: Mapping[str, Any],
        name: str = "n_step",
    ):
        """Creates empty rings.

        Args:
          n: the most steps in a window, at least 1.
          discount: gamma.
          batch_size: the number of agents B.
          spec: a mapping with "observ" and "action", each a nested structure of
            `tf.TensorSpec` of one agent's value (other keys are ignored, so the replay's
            spec of a transition will do).
          name: name of the module.
        """
        super().__init__(name=name)
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        self.n = int(n)
        self.discount = float(discount)
        self.batch_size = int(batch_size)
        rows = [self.n, self.batch_size]
        with self.name_scope:
            self.observ = _Steps(rows, spec["observ"], "observ")
            self.action = _Steps(rows, spec["action"], "action")
            self.next_observ = _Steps(rows, spec["observ"], "next_observ")
            self.reward = tf.Variable(tf.zeros(rows), trainable=False, name="reward")  # [n, B]
            self.terminated = _bools(rows, "terminated")  # [n, B]
            self.truncated = _bools(rows, "truncated")  # [n, B]
            self.pushes = tf.Variable(tf.constant(0, tf.int64), trainable=False, name="pushes")

    def push(
        self,
        observ: Any,
        action: Any,
        reward: tf.Tensor,
        terminated: tf.Tensor,
        truncated: tf.Tensor,
        next_observ: Any,
    ) -> tuple[tf.Tensor, dict[str, Any]]:
        """Stores one step of every agent and emits the transition of the step n-1 before.

        Args:
          observ: [B, ...], the observation the action was chosen for.
          action: [B, ...], the action taken.
          reward: float32 [B].
          terminated: bool [B], the step reached a terminal state.
          truncated: bool [B], the episode was cut short after the step.
          next_observ: [B, ...], the observation after the step (the final one when the
            episode ended).

        Returns:
          valid: bool [B], whether the transition is a real one (all true after n-1 pushes).
          transition: {"observ", "action", "reward", "discount", "next_observ"}, each [B, ...].
        """
        pushes = self.pushes.read_value()
        slot = tf.cast(pushes % self.n, tf.int32)
        self.observ.write(slot, observ)
        self.action.write(slot, action)
        self.next_observ.write(slot, next_observ)
        for variable, value in (
            (self.reward, reward),
            (self.terminated, terminated),
            (self.truncated, truncated),
        ):
            variable.scatter_nd_update([[slot]], tf.convert_to_tensor(value, variable.dtype)[None])
        self.pushes.assign_add(1)
        first = (slot + 1) % self.n  # the slot of the step pushed n-1 pushes ago
        window = (first + tf.range(self.n)) % self.n  # [n], its steps in order
        returns, discounts, lengths = _windows(
            tf.gather(self.reward, window),  # [n, B]
            tf.gather(self.terminated, window),
            tf.gather(self.truncated, window),
            tf.ones([self.n, self.batch_size], tf.bool),
            self.discount,
        )
        last = tf.gather(window, lengths - 1)  # [B], the slot of each window's last step
        transition = {
            "observ": self.observ.read(first),
            "action": self.action.read(first),
            "reward": returns,
            "discount": discounts,
            "next_observ": self.next_observ.read(last),
        }
        valid = tf.fill([self.batch_size], pushes >= self.n - 1)  # [B]
        return valid, transition

    def truncate(self, agent_indices: tf.Tensor) -> tf.Tensor:
        """Ends the episodes of `agent_indices` after their last step pushed, as if truncated.

        For an agent whose environment was restarted without reporting an episode end (a
        run resumed on Gymnasium's environments, whose state no checkpoint holds): its open
        windows stop at its last step and bootstrap from that step's next observation, so
        they never add rewards of the new episode. Where the last step already ended an
        episode, or nothing was pushed yet, nothing changes.

        Args:
          agent_indices: int32 [K], the agents whose episodes begin anew.

        Returns:
          bool [K], whether the agent's episode was open and is now cut.
        """
        agent_indices = tf.convert_to_tensor(agent_indices, tf.int32)  # [K]
        last = tf.cast((self.pushes - 1) % self.n, tf.int32)  # the slot of the last push
        rows = tf.stack([tf.fill(tf.shape(agent_indices), last), agent_indices], 1)  # [K, 2]
        # XLA has no gather_nd from a variable: gather from its value.
        terminated = tf.gather_nd(self.terminated.read_value(), rows)  # [K]
        truncated = tf.gather_nd(self.truncated.read_value(), rows)  # [K]
        cut = ~(terminated | truncated) & (self.pushes > 0)  # [K]
        self.truncated.scatter_nd_update(rows, truncated | cut)
        return cut

    def push_block(
        self,
        observ: Any,
        action: Any,
        reward: tf.Tensor,
        terminated: tf.Tensor,
        truncated: tf.Tensor,
        next_observ: Any,
    ) -> dict[str, Any]:
        """`push`es T steps [T, B, ...] in order; returns the real transitions among them.

        For an actor that collects a block of steps and sends it on: one graph call a
        block instead of one a step. T must be static (a trace per block length). Each
        push reads and writes the window's variables, so a `tf.function` runs them in
        program order (its automatic control dependencies on those resources); eagerly
        they run in order anyway.

        Returns:
          {"observ", "action", "reward", "discount", "next_observ"}, each [K, ...]: the
          transitions of the T pushes that were valid, push after push, agent after agent
          (K = T * B once n - 1 steps were pushed before the block).
        """
        valid, transitions = [], []
        for t in range(reward.shape[0]):
            finished, transition = self.push(
                *(tf.nest.map_structure(lambda x, t=t: x[t], value) for value in (observ, action)),
                reward[t],
                terminated[t],
                truncated[t],
                tf.nest.map_structure(lambda x, t=t: x[t], next_observ),
            )
            valid.append(finished)
            transitions.append(transition)
        valid = tf.concat(valid, 0)  # [T * B]
        return tf.nest.map_structure(
            lambda *parts: tf.boolean_mask(tf.concat(parts, 0), valid), *transitions
        )


def _bools(rows: list[int], name: str) -> tf.Variable:
    return tf.Variable(tf.zeros(rows, tf.bool), trainable=False, name=name)


class _Steps(tf.Module):
    """A nested value of B agents over n steps: one variable [n, B, ...] per leaf."""

    def __init__(self, rows: list[int], spec: Any, name: str):
        super().__init__(name=name)
        self._pack = lambda leaves: tf.nest.pack_sequence_as(spec, leaves)
        self.leaves = [
            tf.Variable(tf.zeros(rows + leaf.shape.as_list(), leaf.dtype), trainable=False)
            for leaf in tf.nest.flatten(spec)
        ]  # [n, B, ...] each

    def write(self, slot: tf.Tensor, value: Any) -> None:
        """Writes the agents' values [B, ...] at step `slot`."""
        tf.nest.assert_same_structure(self._pack(self.leaves), value, check_types=False)
        for leaf, part in zip(self.leaves, tf.nest.flatten(value)):
            leaf.scatter_nd_update([[slot]], tf.convert_to_tensor(part, leaf.dtype)[None])

    def read(self, slots: tf.Tensor) -> Any:
        """The values at step `slots`: a scalar for all agents, or [B], one per agent."""
        if slots.shape.rank == 0:
            return self._pack([tf.gather(leaf, slots) for leaf in self.leaves])
        rows = tf.stack([slots, tf.range(tf.shape(slots)[0])], 1)  # [B, 2]
        # XLA has no gather_nd from a variable: gather from its value.
        return self._pack([tf.gather_nd(leaf.read_value(), rows) for leaf in self.leaves])


def _windows(
    rewards: Sequence[tf.Tensor],
    terminated: Sequence[tf.Tensor],
    truncated: Sequence[tf.Tensor],
    inside: Sequence[tf.Tensor],
    discount: float,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Returns, discounts and lengths of windows given step by step, k = 0 .. n-1.

    Entry k of each argument [...] is the k-th step of every window; `inside` is false
    for the steps past the data. A window takes steps while they are inside and until,
    including, the first terminated or truncated one.
    """
    taking = inside[0]  # [...], step k belongs to the window
    returns = tf.zeros_like(rewards[0])
    lengths = tf.zeros_like(rewards[0], tf.int32)
    ends_terminal = tf.zeros_like(terminated[0])
    # A static count: `len` of a tensor is undefined in a graph (a Python list has one).
    for k in range(rewards.shape[0] if isinstance(rewards, tf.Tensor) else len(rewards)):
        taking &= inside[k]
        returns += tf.where(taking, discount**k * rewards[k], 0.0)
        lengths += tf.cast(taking, tf.int32)
        ends_terminal |= taking & terminated[k]
        taking &= ~(terminated[k] | truncated[k])
    bootstrap = tf.pow(tf.constant(discount, tf.float32), tf.cast(lengths, tf.float32))
    discounts = tf.where(ends_terminal, tf.zeros_like(bootstrap), bootstrap)
    return returns, discounts, lengths
