"""Tests for `batchrl.runners.train`: what a run says when it starts, what a resume keeps."""

import pytest

from batchrl.config import load_run_config
from batchrl.runners import train


def quiet(*_, **__):
    pass


def _train(logdir, steps):
    messages = []
    config = load_run_config("debug", [f"train.total_steps={steps}", "train.eval_every=0"])
    train(config, logdir, progress=lambda text, final=False: messages.append(text))
    return messages


@pytest.mark.slow  # Out of the default suite: 13 s on 2 busy cores (2026-12-06).
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


@pytest.mark.parametrize("eval_on_gymnasium", [False, True])
@pytest.mark.slow  # Out of the default suite: 36 s on 2 busy cores (2026-12-06).
def test_a_resumed_run_evaluates_as_the_uninterrupted_one(tmp_path, eval_on_gymnasium):
    """With environments in TensorFlow ops the weights are equal, and so the evaluations."""
    overrides = [
        "env.backend=tensorflow",
        f"env.eval_on_gymnasium={eval_on_gymnasium}",
        "train.eval_every=64",
        "train.checkpoint_every=128",
    ]
    whole = load_run_config("debug", [*overrides, "train.total_steps=256"])
    expected = train(whole, tmp_path / "whole", progress=quiet)
    half = load_run_config("debug", [*overrides, "train.total_steps=128"])
    train(half, tmp_path / "resumed", progress=quiet)
    actual = train(whole, tmp_path / "resumed", progress=quiet)
    assert actual["eval_return"] == expected["eval_return"]
