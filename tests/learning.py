"""What the learning tests over seeds share: each seed's best evaluation, and k of n."""

import json
from pathlib import Path

from batchrl.config import load_run_config
from batchrl.runners import train


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
