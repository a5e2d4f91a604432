"""Tests for `batchrl.runners.train`: what a run says when it starts."""

from batchrl.runners import train
from batchrl.tools import load_run_config


def _train(logdir, steps):
    messages = []
    config = load_run_config("debug", [f"train.total_steps={steps}", "train.eval_every=0"])
    train(config, logdir, progress=lambda text, final=False: messages.append(text))
    return messages


def test_a_run_whose_checkpoints_were_deleted_says_that_it_starts_from_step_0(tmp_path):
    logdir = tmp_path / "run"
    assert not [text for text in _train(logdir, 32) if "step 0" in text]  # A new run.
    for path in (logdir / "checkpoints").iterdir():  # ckpt-* and the state file.
        path.unlink()
    messages = _train(logdir, 32)
    said = [text for text in messages if "no checkpoint" in text]
    assert said == [
        f"{logdir} holds a run (its config.yaml) but no checkpoint: training starts from step "
        "0; the earlier run's summaries stay in train/ and eval/, where the new curves will be "
        "drawn over them (use another --logdir to keep them apart)."
    ]
    assert messages.index(said[0]) < messages.index(
        next(text for text in messages if text.startswith("First training call"))
    )
