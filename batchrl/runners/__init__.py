"""How a Trainer's work is spread: local (simulate), threads (actor-learner), and `train`.

The ray runner (`batchrl.runners.ray`) is imported only when a config chooses it.
"""

from batchrl.runners.local import LocalTrainer
from batchrl.runners.threads import ActorLearner, ThreadsTrainer
from batchrl.runners.train import make_algorithm, train

__all__ = ["ActorLearner", "LocalTrainer", "ThreadsTrainer", "make_algorithm", "train"]
