"""The declared interfaces between the layers: Algorithm, Policy, Learner, Trainer."""

from __future__ import annotations

import abc

import tensorflow as tf


class Algorithm(tf.Module, abc.ABC):
    """A batched algorithm: inference and learning for B agents, one per environment.

    `batchrl.tools.simulate` drives an algorithm inside one graph call. For every step it
    does the following, where `batch_env` is an in-graph batch of B environments:

        reset_indices = where(batch_env.done or reset)            # [K]
        if reset_indices:
            batch_env.reset(reset_indices)
            algo.begin_episodes(reset_indices)
        agent_indices = range(B)                                  # [B]
        observ = batch_env.observ                                 # [B, ...]
        action = algo.perform(agent_indices, observ)              # [B, ...]
        next_observ, reward, terminated, truncated = batch_env.step(action)
        algo.experience(agent_indices, observ, action, reward,
                        terminated, truncated, next_observ)
        done_indices = where(terminated or truncated)             # [K]
        if done_indices:
            algo.end_episodes(done_indices)

    `terminated` marks a terminal state (no value beyond it); `truncated` marks an episode
    cut short, for example by a time limit, whose `next_observ` can still be bootstrapped.
    Every method is called inside `tf.function`, so it must be written with TensorFlow
    ops; state that lives across calls belongs in `tf.Variable`s. Summaries written with
    `tf.summary` are recorded when `simulate` is called with `log=True`.
    """

    @abc.abstractmethod
    def begin_episodes(self, agent_indices: tf.Tensor) -> None:
        """Starts new episodes for the agents at int32 `agent_indices` [K]."""

    @abc.abstractmethod
    def perform(self, agent_indices: tf.Tensor, observ: tf.Tensor) -> tf.Tensor:
        """Returns actions [K, ...] for the observations [K, ...] of `agent_indices` [K]."""

    @abc.abstractmethod
    def experience(
        self,
        agent_indices: tf.Tensor,
        observ: tf.Tensor,
        action: tf.Tensor,
        reward: tf.Tensor,
        terminated: tf.Tensor,
        truncated: tf.Tensor,
        next_observ: tf.Tensor,
    ) -> None:
        """Receives one transition for each agent in `agent_indices` [K].

        Args:
          agent_indices: int32 [K].
          observ: float32 [K, ...], the observation the action was chosen for.
          action: [K, ...], the action taken.
          reward: float32 [K].
          terminated: bool [K], the step reached a terminal state.
          truncated: bool [K], the episode was cut short after this step.
          next_observ: float32 [K, ...], the observation after the step (the final one
            when the episode ended).
        """

    @abc.abstractmethod
    def end_episodes(self, agent_indices: tf.Tensor) -> None:
        """Ends the episodes of the agents at int32 `agent_indices` [K]."""
