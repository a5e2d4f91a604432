"""Each environment's first whole episode, recorded in the graph while simulate steps the batch."""

from __future__ import annotations

import math

import tensorflow as tf

from batchrl.core import Algorithm
from batchrl.tools.simulate import simulate


class EpisodeRecorder(Algorithm):
    """Forwards to `algo` and records the return and length of each agent's first episode.

    `clear()` forgets the recorded episodes; `finished`, `returns` and `lengths` [B] are
    variables that hold what was recorded since.
    """

    def __init__(self, algo: Algorithm, batch_size: int):
        super().__init__(name="episode_recorder")
        self._algo = algo
        self.autograph = bool(getattr(algo, "autograph", True))
        self.finished = tf.Variable(tf.zeros([batch_size], tf.bool), trainable=False)
        self.returns = tf.Variable(tf.zeros([batch_size]), trainable=False)
        self.lengths = tf.Variable(tf.zeros([batch_size], tf.int32), trainable=False)
        self._return = tf.Variable(tf.zeros([batch_size]), trainable=False)
        self._length = tf.Variable(tf.zeros([batch_size], tf.int32), trainable=False)

    def clear(self) -> None:
        self.finished.assign(tf.zeros_like(self.finished))

    def first_episodes(self) -> tuple[tf.Tensor, tf.Tensor]:
        """Returns [B] and lengths [B] of first episodes; unfinished ones count as they are."""
        returns = tf.where(self.finished, self.returns, self._return)
        lengths = tf.where(self.finished, self.lengths, self._length)
        return returns, lengths

    def begin_episodes(self, agent_indices):
        rows = agent_indices[:, None]
        self._return.scatter_nd_update(rows, tf.zeros_like(agent_indices, tf.float32))
        self._length.scatter_nd_update(rows, tf.zeros_like(agent_indices))
        self._algo.begin_episodes(agent_indices)

    def perform(self, agent_indices, observ):
        return self._algo.perform(agent_indices, observ)

    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        rows = agent_indices[:, None]
        self._return.scatter_nd_add(rows, reward)
        self._length.scatter_nd_add(rows, tf.ones_like(agent_indices))
        self._algo.experience(
            agent_indices, observ, action, reward, terminated, truncated, next_observ
        )

    def end_episodes(self, agent_indices):
        # Static shapes only (no boolean_mask): under XLA a masked index list is padded, and
        # its padding would scatter into other agents' rows.
        rows = agent_indices[:, None]
        first = ~tf.gather(self.finished, agent_indices)  # [K]
        returns = tf.where(
            first, tf.gather(self._return, agent_indices), tf.gather(self.returns, agent_indices)
        )
        lengths = tf.where(
            first, tf.gather(self._length, agent_indices), tf.gather(self.lengths, agent_indices)
        )
        self.returns.scatter_nd_update(rows, returns)
        self.lengths.scatter_nd_update(rows, lengths)
        self.finished.scatter_nd_update(rows, tf.ones_like(agent_indices, tf.bool))
        self._algo.end_episodes(agent_indices)

    def steps_to_update(self):
        return getattr(self._algo, "steps_to_update", lambda: None)()

    def update(self):
        self._algo.update()


def first_episodes(batch_env, recorder: EpisodeRecorder, max_steps: int, steps_per_call: int = 1):
    """Runs every environment's first episode, in the graph (XLA-compilable).

    Clears `recorder`, resets every environment and steps the batch through `recorder`
    (and the algorithm it forwards to), `steps_per_call` steps of `simulate` at a time,
    until every environment has finished an episode or about `max_steps` steps.

    Returns:
      The returns [B] and lengths [B] of the first episodes; unfinished ones count as
      they are.
    """
    recorder.clear()

    def chunk(reset):
        return simulate(batch_env, recorder, reset=reset, steps=steps_per_call)["steps"]

    first = chunk(True)
    limit = max(math.ceil(max_steps / steps_per_call) - 1, 0)
    tf.while_loop(
        lambda count: tf.logical_and(
            count < limit, tf.logical_not(tf.reduce_all(recorder.finished))
        ),
        lambda count: (_after(chunk(False), count + 1),),
        (_after(first, tf.constant(0)),),
    )
    return recorder.first_episodes()


def _after(tensor, value):
    """`value`, computed after `tensor`: orders a loop's next test after its body."""
    with tf.control_dependencies([tensor]):
        return tf.identity(value)
