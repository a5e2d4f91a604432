"""What the learning tests over seeds share: each seed's best evaluation, and k of n."""

import json
from pathlib import Path

from batchrl.config import load_run_config
from batchrl.runners import train
from batchrl.tools.batch_env import BatchEnv
from batchrl.tools.environments import make_env
from batchrl.tools.in_graph_batch_env import InGraphBatchEnv
from batchrl.training import PolicyEvaluator
from batchrl.training.evaluation import Evaluation


def best_evaluations(preset: str, overrides: list[str], seeds, logdir: Path) -> list[float]:
    """Trains `preset` with `overrides` once per seed, in `logdir/<seed>`, with
    `train.export_best`; the best evaluation of each run, from its `policy_best/batchrl.json`.
    """
    best = []
    for seed in seeds:
        extra = [*overrides, "train.export_best=true", f"train.seed={seed}"]
        train(load_run_config(preset, extra), logdir / str(seed), progress=lambda *_, **__: None)
        metadata = logdir / str(seed) / "policy_best" / "batchrl.json"
        best.append(json.loads(metadata.read_text())["eval_return"])
    return best


def assert_k_of_n(returns: dict[int, float], threshold: float, k: int) -> None:
    """At least `k` of the seeds' returns (seed -> return) reach `threshold`; the message
    gives every seed's."""
    reached = [seed for seed, value in returns.items() if value >= threshold]
    assert len(reached) >= k, (
        f"{len(reached)} of {len(returns)} seeds reached {threshold} (wanted {k}): {returns}"
    )


def final_evaluations(preset: str, steps: int, seeds, logdir: Path, restore) -> dict[int, float]:
    """Trains `preset` for `steps` once per seed, in `logdir/<seed>`, and evaluates each
    final checkpoint (`restore(logdir, config)` gives its algorithm second) greedily for
    16 episodes on 8 of Gymnasium's environments of the preset's id: seed -> mean return.
    """
    returns = {}
    for seed in seeds:
        overrides = [f"train.total_steps={steps}", "train.eval_every=0", f"train.seed={seed}"]
        config = load_run_config(preset, overrides)
        folder = logdir / str(seed)
        assert train(config, folder, progress=lambda *_, **__: None)["step"] == steps
        envs = [make_env(config.env.id) for _ in range(8)]
        returns[seed] = Evaluation(
            InGraphBatchEnv(BatchEnv(envs, blocking=True), seed=1),
            PolicyEvaluator(restore(folder, config)[1], 8),
            episodes=16,
        ).run()["mean_return"]
    return returns
