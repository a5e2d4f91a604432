"""The local runner: the algorithm learns inside `simulate`, one graph call per step."""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.framework import ops

from batchrl.config.members import member_offsets
from batchrl.core import Algorithm, Trainer
from batchrl.tools.environments import make_in_graph_env
from batchrl.tools.simulate import needs_autograph, simulate


class LocalTrainer(Trainer):
    """Runner `local`: `train.steps_per_call` batched steps of `simulate` per `step`.

    The environments (Gymnasium's through `InGraphBatchEnv`, or written in TensorFlow
    ops) and the algorithm's `perform`, `experience` and updates are one graph call; with
    `train.jit_compile` one XLA computation (rollouts, advantages, every epoch and
    minibatch, the optimizer and the normalizers), which records no summaries: it returns
    `simulate`'s statistics and the algorithm's `summaries()` (if it has that method) as
    tensors, and the train loop writes them. So does a population (`train.population`
    M > 1), in graph mode too: its statistics and summaries are [M], one per member, and
    a step's environment steps are each member's.
    """

    trains_populations = True

    @classmethod
    def make_batch_env(cls, config, seed: int):
        """The training environments: `env.num_envs` of them (of each member), in the graph."""
        members = config.train.population
        offsets = member_offsets(config.train) if config.train.seeds else None
        num_envs = config.env.num_envs
        return make_in_graph_env(config.env, num_envs, seed, members=members, offsets=offsets)

    def __init__(self, config, algo: Algorithm, batch_env, seed: int = 0):
        del seed  # The environments and the algorithm hold their random streams.
        steps = config.train.steps_per_call
        self.members = members = config.train.population
        self.jit_compile = bool(config.train.jit_compile)
        # A population's statistics and summaries are [M], which the train loop writes.
        self.in_graph_logging = not self.jit_compile and members == 1
        self._env_steps = steps * len(batch_env) // members  # Each member's.
        autograph = needs_autograph(batch_env, algo)
        if not self.in_graph_logging:
            summaries = getattr(algo, "summaries", None)

            def call():
                stats = simulate(batch_env, algo, steps=steps, members=members)
                return dict(stats, **summaries()) if summaries else stats

            self._call = tf.function(call, jit_compile=self.jit_compile, autograph=autograph)
        else:
            self._call = tf.function(
                lambda: simulate(batch_env, algo, log=True, steps=steps), autograph=autograph
            )

    def step(self) -> tuple[int, dict]:
        if self.jit_compile and not self._call.experimental_get_tracing_count():
            align_function_names()
        return self._env_steps, self._call()


# TensorFlow names every traced function (and so every computation of the XLA program)
# with a process-wide counter, and XLA's persistent compilation cache (train.xla_cache)
# keys programs by those names: a process that ran other ops before (another seed's
# evaluations, a resume) would miss the program a former run stored. Moving the counter
# to a round value before tracing the training call makes its names depend on the
# tracing alone. TensorFlow has no public way to name functions deterministically.
_NAME_COUNTER_STEP = 2**17


def align_function_names() -> None:
    """Advances TensorFlow's name counter to the next multiple of 2**17 (about 20 ms)."""
    uid = getattr(ops, "uid", None)
    if uid is None:  # A TensorFlow without the private counter: nothing to align.
        return
    target = (uid() // _NAME_COUNTER_STEP + 1) * _NAME_COUNTER_STEP
    while uid() < target - 1:
        pass
