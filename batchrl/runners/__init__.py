"""How a Trainer's work is spread: local (simulate), threads (actor-learner), and `train`.

`train(config, logdir)` builds a run from its config and hands it to the train loop in
`batchrl.training`. The ray runner (`batchrl.runners.ray`) is imported only when a config
chooses it. Algorithms and the loop itself live elsewhere; a runner only spreads work.
"""

from batchrl.runners.local import LocalTrainer
from batchrl.runners.threads import ActorLearner, ThreadsTrainer
from batchrl.runners.train import make_algorithm, train

__all__ = ["ActorLearner", "LocalTrainer", "ThreadsTrainer", "make_algorithm", "train"]
