"""Population-based training of a PPO population through `train`: short runs of `debug`."""

import json
import math

import numpy as np
import pytest
import tensorflow as tf

from batchrl.config import load_run_config
from batchrl.runners import train


def quiet(*_, **__):
    pass


def _debug(*overrides):
    """4 members of 2 CartPole environments in TensorFlow ops, PBT at 128 and 256."""
    return load_run_config(
        "debug",
        [
            "env.id=CartPole-v1",
            "env.backend=tensorflow",
            "train.population=4",
            "pbt.interval=128",
            *overrides,
        ],
    )


def _lineage(logdir):
    lines = (logdir / "pbt.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _checkpoint(logdir, name):
    reader = tf.train.load_checkpoint(str(logdir / "checkpoints"))
    return reader.get_tensor(f"algo/{name}/.ATTRIBUTES/VARIABLE_VALUE")


def test_pbt_with_nothing_to_perturb_still_exploits(tmp_path):
    """pbt.perturb [] (the default): the worst member takes the best's weights, unchanged."""
    config = _debug()
    assert config.pbt.perturb == ()
    result = train(config, tmp_path, progress=quiet)
    assert result["step"] == 256
    lines = _lineage(tmp_path)
    assert [line["step"] for line in lines] == [128, 256]  # One member of 4, each time.
    for line in lines:
        assert line["parent"] != line["member"]
        assert set(line) == {"step", "member", "parent"}  # No settings to log.
    # The copy made at 256 holds its parent's parameters (nothing trains after it).
    last = lines[-1]
    params = _checkpoint(tmp_path, "policy_params")
    np.testing.assert_array_equal(params[last["member"]], params[last["parent"]])


def test_a_copy_inherits_its_parents_listed_settings(tmp_path):
    """Listed, not perturbed: at the first exploit the copy logs and keeps its parent's."""
    entropy = [0.0, 0.01, 0.02, 0.03]
    config = _debug(f"ppo.entropy_coef={entropy}", "train.total_steps=128")
    result = train(config, tmp_path, progress=quiet)
    (line,) = _lineage(tmp_path)
    assert line["ppo.entropy_coef"] == pytest.approx(entropy[line["parent"]])
    rows = result["members"]
    assert rows[line["member"]]["ppo.entropy_coef"] == pytest.approx(entropy[line["parent"]])
    rates = _checkpoint(tmp_path, "pbt_settings/entropy_coef")
    np.testing.assert_allclose(rates, [row["ppo.entropy_coef"] for row in rows])


def test_a_finished_run_run_again_shows_and_exports_the_settings_pbt_changed(tmp_path):
    """Resumed at its end, it trains nothing: its tables and export read the checkpoint."""
    config = _debug("pbt.perturb=[learning_rate]")
    train(config, tmp_path, progress=quiet)
    before = json.loads((tmp_path / "policy" / "batchrl.json").read_text())
    assert math.isfinite(before["train_return"])
    messages = []
    result = train(config, tmp_path, progress=lambda text, final=False: messages.append(text))
    assert result["step"] == 256
    rates = _checkpoint(tmp_path, "pbt_settings/learning_rate")
    assert (rates != np.float32(config.ppo.learning_rate)).any()  # PBT changed some.
    tables = [text for text in messages if text.startswith("Members of the population")]
    assert len(tables) == 2  # At the start and at the end.
    for table in tables:
        rows = table.splitlines()[2:]
        for member, rate in enumerate(rates):
            assert rows[member].split()[2] == f"{rate:.4g}", table
    assert [row["ppo.learning_rate"] for row in result["members"]] == pytest.approx(rates)
    metadata = json.loads((tmp_path / "policy" / "batchrl.json").read_text())
    assert metadata["ppo.learning_rate"] == pytest.approx(rates[metadata["member"]])
    assert metadata["ppo.learning_rate"] == pytest.approx(before["ppo.learning_rate"])
    # No training return this time: the export leaves it out rather than writing NaN.
    assert "train_return" not in metadata
    assert metadata["eval_return"] == pytest.approx(before["eval_return"])


@pytest.mark.slow  # Out of the default suite: 15 s on 2 busy cores (2026-12-06).
def test_a_run_whose_checkpoint_predates_inherited_settings_resumes(tmp_path, monkeypatch):
    """Its checkpoint lacks the listed settings' variables: they start from the config's."""
    from batchrl.algorithms.ppo import population

    overrides = ("ppo.entropy_coef=[0.0, 0.01, 0.02, 0.03]", "pbt.perturb=[learning_rate]")
    made = population.MemberSettings

    def before_inheriting(cfg, pbt_keys, members, resample_probability=0.0, inherit=False):
        return made(cfg, pbt_keys, members, resample_probability)  # Listed: constants.

    with monkeypatch.context() as patch:
        patch.setattr(population, "MemberSettings", before_inheriting)
        train(_debug(*overrides, "train.total_steps=128"), tmp_path, progress=quiet)
    saved = [name for name, _ in tf.train.list_variables(str(tmp_path / "checkpoints"))]
    assert not any("pbt_settings/entropy_coef" in name for name in saved)
    messages = []
    progress = lambda text, final=False: messages.append(text)  # noqa: E731
    result = train(_debug(*overrides), tmp_path, progress=progress)
    assert result["step"] == 256
    assert any("Resumed from" in text for text in messages)
    assert any(
        "predates PBT copies inheriting listed settings: ppo.entropy_coef" in text
        for text in messages
    )
    assert len(_checkpoint(tmp_path, "pbt_settings/entropy_coef")) == 4


def test_the_train_script_refuses_an_interval_between_training_calls(tmp_path, capsys):
    """Exit 2 at load: calls of 16 x 2 = 32 steps never end at 48."""
    from batchrl.scripts import train as train_script

    argv = ["--config=debug", "--set", "train.population=4", "--set", "train.eval_every=16"]
    argv += ["--set", "pbt.interval=48", f"--logdir={tmp_path}"]
    assert train_script.main(argv) == 2
    error = capsys.readouterr().err
    assert "pbt.interval=48 must be a multiple" in error
    assert "train.steps_per_call=16 x env.num_envs=2 = 32" in error
