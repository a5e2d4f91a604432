"""Pieces that algorithms and environments in TensorFlow ops build from.

Streaming normalizers and reward scaling, rollout and episode buffers, minibatch
permutations in the graph, Adam with its state in plain variables, learning-rate
schedules, scalar summaries with exact tags, and variables a checkpoint does not track.
Each is small and knows nothing of environments, batching or the train loop; a concept
that needs several modules (replay buffers, populations) gets a folder of its own.
`optimizers` is imported by name (`from batchrl.parts import optimizers`): it loads Keras;
so is `pbt`, population-based training's exploit and explore steps.
"""

from batchrl.parts import summary
from batchrl.parts.normalizer import RewardScaler, StreamingNormalizer
from batchrl.parts.permutations import random_permutations
from batchrl.parts.rollout_buffer import EpisodeBuffer, RolloutBuffer
from batchrl.parts.schedules import SCHEDULES, learning_rate
from batchrl.parts.untracked import Untracked

__all__ = [
    "SCHEDULES",
    "EpisodeBuffer",
    "RewardScaler",
    "RolloutBuffer",
    "StreamingNormalizer",
    "Untracked",
    "learning_rate",
    "random_permutations",
    "summary",
]
