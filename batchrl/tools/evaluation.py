"""Evaluation episodes: the first whole episode of each environment, through simulate."""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from batchrl.core import Algorithm
from batchrl.tools import summary
from batchrl.tools.simulate import needs_autograph, simulate


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


class Evaluation:
    """Runs at least `episodes` whole evaluation episodes and reports their mean.

    Each round resets every environment and counts only its first episode, so that short
    episodes are not over-represented. With `jit_compile` (environments in TensorFlow ops
    only), a round is one XLA program: it steps until every environment has finished an
    episode, or `max_steps` batched steps (episodes unfinished then count as they are).
    Otherwise each `steps_per_call` steps are one graph call, until all have finished.
    """

    def __init__(
        self,
        batch_env,
        algo: Algorithm,
        episodes: int,
        steps_per_call: int = 64,
        jit_compile: bool = False,
        max_steps: int = 100_000,
    ):
        self._recorder = EpisodeRecorder(algo, len(batch_env))
        self._rounds = math.ceil(episodes / len(batch_env))
        self._jit_compile = jit_compile
        recorder = self._recorder

        def chunk(reset):
            return simulate(batch_env, recorder, reset=reset, steps=steps_per_call)

        def round_():
            return first_episodes(batch_env, recorder, max_steps, steps_per_call)

        autograph = needs_autograph(batch_env, recorder)
        if jit_compile:
            self._call = tf.function(round_, jit_compile=True, autograph=autograph)
        else:
            self._call = tf.function(chunk, autograph=autograph)

    def run(self, writer=None, step=None) -> dict[str, float]:
        """Returns `mean_return`, `mean_length` and `episodes`; writes them as summaries.

        The episodes continue the environments' random streams;
        `batchrl.tools.environments.restart_streams` first makes them depend on a seed alone
        (equal weights then give equal returns).
        """
        returns, lengths = [], []
        for _ in range(self._rounds):
            if self._jit_compile:
                round_returns, round_lengths = self._call()
            else:
                self._recorder.clear()
                self._call(tf.constant(True))
                while not self._recorder.finished.numpy().all():
                    self._call(tf.constant(False))
                round_returns, round_lengths = self._recorder.returns, self._recorder.lengths
            returns.extend(round_returns.numpy())
            lengths.extend(round_lengths.numpy())
        result = {
            "mean_return": float(np.mean(returns)),
            "mean_length": float(np.mean(lengths)),
            "episodes": len(returns),
        }
        if writer is not None:
            with writer.as_default(step=step):
                summary.scalar("eval/mean_return", result["mean_return"])
                summary.scalar("eval/mean_length", result["mean_length"])
        return result


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
