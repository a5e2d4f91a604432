"""Evaluation episodes: the first whole episode of each environment, through simulate."""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from batchrl.core import Algorithm
from batchrl.parts import summary
from batchrl.tools.episodes import EpisodeRecorder, first_episodes
from batchrl.tools.simulate import needs_autograph, simulate


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
        members: int = 1,
    ):
        """Args:
        batch_env: the evaluation environments; with `members`, M blocks of them.
        algo: what acts, e.g. a `PolicyEvaluator`.
        episodes: at least this many episodes in a run (of each member).
        steps_per_call: batched steps per graph call (without `jit_compile`).
        jit_compile: run each round as one XLA program.
        max_steps: batched steps a round takes at most (with `jit_compile`).
        members: M > 1: block m of the environments is member m's, and `run` reports
          each member's mean too.
        """
        self._recorder = EpisodeRecorder(algo, len(batch_env))
        self._members = members
        self._rounds = math.ceil(episodes * members / len(batch_env))
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

        With members, also `member_returns`, each member's mean return [M] (the
        summaries are of all members).

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
        if self._members > 1:  # Each round's returns are member-major: [rounds, M, E].
            by_member = np.reshape(returns, [self._rounds, self._members, -1])
            result["member_returns"] = by_member.mean(axis=(0, 2)).tolist()
        if writer is not None:
            with writer.as_default(step=step):
                summary.scalar("eval/mean_return", result["mean_return"])
                summary.scalar("eval/mean_length", result["mean_length"])
        return result
