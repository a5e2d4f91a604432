"""The algorithms: one folder each (ppo/, impala/, es/, dqn/, sac/ with TD3), each a learner.

A folder holds the algorithm's class, which reads like its paper (collect, targets,
update, report), the pure math as functions of tensors in modules of their own (PPO's
`advantages.py` and `losses.py`, IMPALA's `vtrace.py`, SAC's `squashed_gaussian.py`) and a
README.md with the paper and every deviation from it. What a second algorithm needs lives
in `batchrl.parts`; how the work is spread over threads or machines lives in
`batchrl.runners`.
"""

from batchrl.algorithms.dqn import DQN
from batchrl.algorithms.es import ES
from batchrl.algorithms.impala import IMPALA
from batchrl.algorithms.ppo import PPO
from batchrl.algorithms.sac import SAC, TD3
from batchrl.core import Algorithm

__all__ = ["DQN", "ES", "IMPALA", "PPO", "SAC", "TD3", "Algorithm"]
