"""Fuses an in-graph batch environment and an algorithm into one graph call."""

from __future__ import annotations

import tensorflow as tf

from batchrl.parts import summary
from batchrl.tools.in_graph_env import mask_indices


def simulate(
    batch_env, algo, log=False, reset=False, steps: int = 1, members: int = 1
) -> dict[str, tf.Tensor]:
    """Runs `steps` batched environment steps driven by `algo`.

    Each step resets the environments whose episode ended (all of them in the first step
    when `reset` is true; `batch_env.reset_where`, by mask), calls `algo.begin_episodes`
    for them, `algo.perform` for all, steps the environments, calls `algo.experience`
    with the transitions, and `algo.end_episodes` for the environments whose episode
    ended in this step.
    `begin_episodes` and `end_episodes` are only called with at least one index. Episodes
    interrupted by `reset` are dropped from the statistics and get no `end_episodes` call.
    Inside a graph too, each of these calls runs after every side effect of the one before,
    whether or not its inputs depend on it (an action of zeros still waits for the reset).

    Wrap the call in `tf.function` so that all `steps` run as one graph call
    (a `tf.while_loop`); with an environment written in TensorFlow ops, also
    `tf.function(jit_compile=True)`. With `log` true, the algorithm's `tf.summary` calls
    are recorded and the statistics of finished episodes are written as the scalars
    `simulate/mean_return`, `simulate/mean_length` and `simulate/episodes`, at the
    default summary step (`tf.summary.experimental.set_step`).

    Args:
      batch_env: an `InGraphEnv`, e.g. `InGraphBatchEnv` or an environment in `batchrl.envs`.
      algo: an `Algorithm`.
      log: bool or bool tensor, whether to record summaries.
      reset: bool or bool tensor, whether to start new episodes everywhere first.
      steps: number of batched steps, a Python int or an int32 tensor.
      members: with M > 1, the batch is M blocks of environments, one per member of a
        population, and the statistics are each block's, [M]; `log` must be false.

    Returns:
      A dict of scalar tensors (or [M] with `members`) over the episodes that finished
      during the call: `episodes` (int32 count), `mean_return` and `mean_length` (float32,
      NaN when no episode finished), and `steps`, the environment steps taken (steps x
      batch size).
    """
    if members > 1 and log is not False:
        raise ValueError("simulate records no summaries of members: call it with log=False.")
    log = tf.convert_to_tensor(log, tf.bool)
    reset = tf.convert_to_tensor(reset, tf.bool)
    steps = tf.convert_to_tensor(steps, tf.int32)
    all_indices = tf.range(len(batch_env))  # [B]

    def total(x):
        """The sum of `x` [B]: a scalar, or [M], each member's."""
        if members == 1:
            return tf.reduce_sum(x)
        return tf.reduce_sum(tf.reshape(x, [members, -1]), 1)

    def body(step, sum_return, sum_length, episodes):
        in_order = _InOrder(step)
        with tf.summary.record_if(log):
            reset_mask = tf.logical_or(batch_env.done, tf.logical_and(reset, step == 0))  # [B]
            in_order(_if_any, reset_mask, lambda: _begin(batch_env, algo, reset_mask))
            observ = in_order(batch_env.observ.read_value)  # [B, ...]
            action = in_order(algo.perform, all_indices, observ)  # [B, ...]
            next_observ, reward, terminated, truncated = in_order(batch_env.step, action)
            transition = (observ, action, reward, terminated, truncated, next_observ)
            in_order(algo.experience, all_indices, *transition)
            done_mask = tf.logical_or(terminated, truncated)  # [B]
            in_order(_if_any, done_mask, lambda: algo.end_episodes(mask_indices(done_mask)))
        ended_return = tf.where(done_mask, batch_env.episode_return, 0.0)  # [B]
        ended_length = tf.where(done_mask, batch_env.episode_length, 0)  # [B]
        return (
            step + 1,
            sum_return + total(ended_return),
            sum_length + total(ended_length),
            episodes + total(tf.cast(done_mask, tf.int32)),
        )

    def run(first, last, totals):
        """Steps `first` to `last` (exclusive); returns the updated (sums, count)."""
        _, *totals = tf.while_loop(
            lambda step, *_: step < last, body, (first, *totals), parallel_iterations=1
        )
        return totals

    shape = [] if members == 1 else [members]
    totals = (tf.zeros(shape), tf.zeros(shape, tf.int32), tf.zeros(shape, tf.int32))
    if getattr(algo, "steps_to_update", lambda: None)() is None:
        sum_return, sum_length, episodes = run(tf.constant(0), steps, totals)
    else:
        # Loops of steps that end where the algorithm's updates fall, each followed by the
        # update when it is due (see `Algorithm.steps_to_update`). The update is in the
        # program once: XLA compiles each call site of it.
        def chunk(done, *totals):
            in_order = _InOrder(done)
            last = done + tf.minimum(in_order(algo.steps_to_update), steps - done)
            totals = in_order(run, done, last, totals)
            due = in_order(lambda: tf.equal(algo.steps_to_update(), 0))
            with tf.summary.record_if(log):
                in_order(tf.cond, due, algo.update, lambda: None)
            return (last, *totals)

        _, *totals = tf.while_loop(
            lambda done, *_: done < steps, chunk, (tf.constant(0), *totals), parallel_iterations=1
        )
        sum_return, sum_length, episodes = totals
    count = tf.cast(episodes, tf.float32)
    nan = tf.constant(float("nan"))
    mean_return = tf.where(episodes > 0, sum_return / tf.maximum(count, 1.0), nan)
    mean_length = tf.where(
        episodes > 0, tf.cast(sum_length, tf.float32) / tf.maximum(count, 1.0), nan
    )
    if members == 1:
        with tf.summary.record_if(tf.logical_and(log, episodes > 0)):
            summary.scalar("simulate/mean_return", mean_return)
            summary.scalar("simulate/mean_length", mean_length)
            summary.scalar("simulate/episodes", episodes)
    return {
        "episodes": episodes,
        "mean_return": mean_return,
        "mean_length": mean_length,
        "steps": steps * len(batch_env),
    }


def needs_autograph(batch_env, algo) -> bool:
    """Whether a `tf.function` around `simulate(batch_env, algo)` needs autograph.

    False when both declare (`autograph = False`) that they write their control flow in
    TensorFlow ops; tracing without autograph's rewriting is about twice as fast.
    """
    return bool(getattr(batch_env, "autograph", True) or getattr(algo, "autograph", True))


def _begin(batch_env, algo, mask):
    mask = tf.identity(mask)  # In the graph of the cond's branch, which `_InOrder` orders.
    in_order = _InOrder(mask)
    in_order(batch_env.reset_where, mask)
    in_order(algo.begin_episodes, mask_indices(mask))


class _InOrder:
    """Runs calls in a graph in program order: each after every stateful op of the last.

    Automatic control dependencies order two stateful ops only when they use the same
    variable, or when neither uses any. An environment step (a `tf.numpy_function`, no
    variable) and a reset inside `tf.cond` (which writes variables) would otherwise run in
    either order or at once, and so would an algorithm's side effects and the environment
    calls. Eagerly, calls run in order anyway.
    """

    def __init__(self, tensor: tf.Tensor):
        """Orders calls in the graph of `tensor`, e.g. a loop variable of the body."""
        self._graph = None if tf.executing_eagerly() else tensor.graph
        self._last = []  # The stateful ops of the latest call that had any.

    def __call__(self, fn, *args):
        if self._graph is None:
            return fn(*args)
        start = len(self._graph.get_operations())
        with tf.control_dependencies(self._last):
            result = fn(*args)
        created = self._graph.get_operations()[start:]
        # Ops inside a nested tf.cond or tf.while_loop belong to graphs of their own, and
        # the cond or loop op here finishes only after them.
        stateful = [op for op in created if op.op_def.is_stateful]
        self._last = stateful or self._last
        return result


def _if_any(mask, fn):
    """Calls `fn` only when the bool vector `mask` [B] has a true entry; ignores its result."""

    def call():
        fn()

    tf.cond(tf.reduce_any(mask), call, lambda: None)
