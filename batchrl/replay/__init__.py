"""Replay buffers held in TensorFlow variables, for off-policy algorithms (DQN, SAC, Ape-X).

`UniformReplay` and `PrioritizedReplay` (proportional, Schaul et al. 2016, over the
`SumTree`) share one interface: `add(items, priorities=None)`, `sample(batch_size, beta)`
-> `(indices, weights, items)`, `update_priorities(indices, priorities)`, `size()` and
`capacity`. Items are nested structures of tensors kept in a `Ring` of variables, samples
come from a checkpointed `RandomStream`, and everything works eagerly, in `tf.function`
and under XLA, and survives `tf.train.Checkpoint`. `NStep` turns the steps of B agents
into n-step transitions before they are added, and `n_step_returns` computes the same
returns over a [T, B] block. `StepReplay` is both in one, for the B agents of `simulate`:
it stores each observation once (the next one is the following slot's) and samples
uniformly or by priority, with the same `sample` and `update_priorities`. What to sample
when, schedules of beta and the learners' targets live in the algorithms; spreading
actors and a shared buffer over processes lives in the runners.
"""

from batchrl.replay.n_step import NStep, n_step_returns, transition_spec
from batchrl.replay.prioritized import PrioritizedReplay
from batchrl.replay.random_stream import RandomStream
from batchrl.replay.ring import Ring
from batchrl.replay.step_replay import StepReplay
from batchrl.replay.sum_tree import SumTree
from batchrl.replay.uniform import UniformReplay

__all__ = [
    "NStep",
    "PrioritizedReplay",
    "RandomStream",
    "Ring",
    "StepReplay",
    "SumTree",
    "UniformReplay",
    "n_step_returns",
    "transition_spec",
]
