"""What a training run does around the algorithm: the loop, checkpoints, evaluation, export.

`train_loop.run` drives a `batchrl.core.Trainer` step by step and owns the counters,
signals, summaries and decisions; `Checkpoints` saves atomically and resumes past
unreadable files; `Evaluation` scores the policy on whole episodes; `PolicyEvaluator`
hands an algorithm's greedy policy to it; `export_policy` writes a SavedModel; `video`
records episodes; `MemberLogs` writes a population's summaries member by member. Which
runner spreads the work (local, threads, Ray) is in `batchrl.runners`, and
`batchrl.runners.train` assembles a run from its config.
"""

from batchrl.training.checkpoints import CheckpointError, Checkpoints
from batchrl.training.evaluation import Evaluation
from batchrl.training.export import export_policy
from batchrl.training.member_logs import MemberLogs
from batchrl.training.policy_evaluator import PolicyEvaluator
from batchrl.training.train_loop import Interrupted, Progress, run
from batchrl.training.video import VideoWriter, record_episode

__all__ = [
    "CheckpointError",
    "Checkpoints",
    "Evaluation",
    "Interrupted",
    "MemberLogs",
    "PolicyEvaluator",
    "Progress",
    "VideoWriter",
    "export_policy",
    "record_episode",
    "run",
]
