"""The recurrent policy state of every agent of a population, as PPO keeps it for its own."""

from __future__ import annotations

import tensorflow as tf


class CoreStates(tf.Module):
    """Each agent's recurrent state [K, S], the one its rollout began with, and `first`.

    What `PPO` keeps for a recurrent policy, for all K agents at once (`simulate` calls a
    population's `perform` and `experience` with all its agents):

        states.begin(agent_indices)          # episodes begin: zero states, first = True
        state = states.read(rollout_step == 0)  # [K, S]; kept as the rollout's start too
        states.write(new_state)              # after the policy's step
        first = states.take_first()          # [K] for the rollout; then all False
        start = states.rollout_start         # [K, S], the columns' first states

    The variables survive `tf.train.Checkpoint`.
    """

    def __init__(self, agents: int, state_size: int, name: str = "core_states"):
        super().__init__(name=name)
        with self.name_scope:
            self.state = _zeros([agents, state_size], tf.float32, "state")
            self.rollout_start = _zeros([agents, state_size], tf.float32, "rollout_start")
            self.first = _zeros([agents], tf.bool, "first")  # The next step begins an episode.

    def begin(self, agent_indices: tf.Tensor) -> None:
        """Agents `agent_indices` [k] begin episodes: zero states, and `first` set."""
        rows = agent_indices[:, None]
        size = self.state.shape[1]
        self.state.scatter_nd_update(rows, tf.zeros([tf.size(agent_indices), size]))
        self.first.scatter_nd_update(rows, tf.ones_like(agent_indices, tf.bool))

    def read(self, rollout_begins: tf.Tensor) -> tf.Tensor:
        """The agents' states [K, S]; where `rollout_begins` (scalar bool) they are kept as
        the states the rollout starts from."""
        state = self.state.read_value()

        def remember_start():
            self.rollout_start.assign(state)

        tf.cond(rollout_begins, remember_start, lambda: None)
        return state

    def write(self, state: tf.Tensor) -> None:
        self.state.assign(state)

    def take_first(self) -> tf.Tensor:
        """Whether each agent's step began its episode [K]; clears it for the next step."""
        first = self.first.read_value()
        self.first.assign(tf.zeros_like(first))
        return first


def _zeros(shape, dtype, name):
    return tf.Variable(tf.zeros(shape, dtype), trainable=False, name=name)
