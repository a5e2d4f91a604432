"""The train script with a population of PPO agents (train.population > 1)."""

import json
import math

import numpy as np
import pytest
import tensorflow as tf

from batchrl.config import ConfigError, load_run_config, save_config
from batchrl.config.run_config import load_saved_run_config
from batchrl.runners import train
from batchrl.scripts import train as train_script
from tests.scripts.test_train_tf import quiet, scalars


def _debug(*overrides):
    return load_run_config(
        "debug",
        ["env.id=CartPole-v1", "env.backend=tensorflow", "train.population=3", *overrides],
    )


def _policy_params(logdir):
    reader = tf.train.load_checkpoint(str(logdir / "checkpoints"))
    return reader.get_tensor("algo/policy_params/.ATTRIBUTES/VARIABLE_VALUE")


def test_a_population_logs_and_evaluates_each_member(tmp_path):
    result = train(_debug(), tmp_path, progress=quiet)
    assert result["step"] == 256  # Each member's steps.
    assert [row["seed"] for row in result["members"]] == [0, 1, 2]
    assert all(math.isfinite(row["eval_return"]) for row in result["members"])
    mean = np.mean([row["eval_return"] for row in result["members"]])
    assert result["eval_return"] == pytest.approx(mean)
    for member in ("member-00", "member-02"):
        assert scalars(tmp_path / member / "train", "simulate/episodes")
        kl = scalars(tmp_path / member / "train", "ppo/kl")
        assert kl and all(np.isfinite(value) for _, value in kl)
        evaluations = scalars(tmp_path / member / "eval", "eval/mean_return")
        assert [step for step, _ in evaluations] == [128, 256]
    assert _policy_params(tmp_path).shape[0] == 3
    # The aggregate of the final evaluations, also in eval/.
    aggregate = result["aggregate"]
    assert aggregate["members"] == 3 and aggregate["mean"] == pytest.approx(mean)
    assert aggregate["ci_low"] <= aggregate["mean"] <= aggregate["ci_high"]
    for tag, name in [("iqm_return", "iqm"), ("mean_return_ci_low", "ci_low")]:
        assert scalars(tmp_path / "eval", f"eval/{tag}")[-1] == (
            256,
            pytest.approx(aggregate[name]),
        )
    # Every member's policy, and the best one's in policy/.
    observ = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    actions = []
    for member in range(3):
        folder = tmp_path / "policies" / f"member-{member:02d}"
        policy = tf.saved_model.load(str(folder))
        actions.append(policy(observ).numpy())
        own = json.loads((folder / "batchrl.json").read_text())  # Who it is, how it did.
        assert own == {"member": member, **result["members"][member]}
    best = int(np.argmax([row["eval_return"] for row in result["members"]]))
    metadata = json.loads((tmp_path / "policy" / "batchrl.json").read_text())
    assert metadata["member"] == best and metadata["seed"] == best
    assert metadata["eval_return"] == result["members"][best]["eval_return"]
    best_policy = tf.saved_model.load(str(tmp_path / "policy"))
    np.testing.assert_array_equal(best_policy(observ).numpy(), actions[best])


def test_a_population_trains_on_gymnasium_environments(tmp_path):
    """Members on Gymnasium's CartPole-v1 (M x B environments, environment i seeded with
    seed + i, so no two members share an environment's stream), in graph mode."""
    config = _debug("env.backend=gymnasium", "env.num_envs=2")
    result = train(config, tmp_path, progress=quiet)
    assert result["step"] == 256
    assert all(math.isfinite(row["eval_return"]) for row in result["members"])
    for member in ("member-00", "member-02"):
        assert scalars(tmp_path / member / "train", "simulate/episodes")
    params = _policy_params(tmp_path)
    assert params.shape[0] == 3 and not np.array_equal(params[0], params[1])


@pytest.mark.slow  # Out of the default suite: 16 s on 2 busy cores (2026-12-06).
def test_a_sweep_trains_its_product_as_one_population(tmp_path, capfd):
    code = train_script.main(
        [
            "--config=debug",
            "--set=env.id=CartPole-v1",
            "--set=env.backend=tensorflow",
            "--sweep=ppo.learning_rate=1e-3,3e-4",
            "--sweep=train.seed=4,9",
            f"--logdir={tmp_path}",
        ]
    )
    err = capfd.readouterr().err
    assert code == 0, err
    assert "Sweep: train.population=4 ppo.learning_rate=[0.001, 0.001, 0.0003, 0.0003]" in err
    # The table at the start and at the end: member, seed, and its learning rate.
    lines = [line.split() for line in err.splitlines() if line.strip().startswith("3 ")]
    assert len(lines) == 2 and all(line[:3] == ["3", "9", "0.0003"] for line in lines), err
    assert "Final evaluation over 4 members: mean" in err
    config = load_saved_run_config(tmp_path / "config.yaml")
    assert config.train.seeds == (4, 9, 4, 9)
    rates = scalars(tmp_path / "member-02" / "train", "ppo/learning_rate")
    assert rates and all(value == pytest.approx(3e-4) for _, value in rates)


PBT = ("train.population=4", "pbt.interval=128", "pbt.perturb=[learning_rate, clip_ratio]")
# Recurrent members, with resampling PBT of the discount too.
GRU_PBT = (
    "network.name=gru",
    "network.recurrent_units=8",
    *PBT[:2],
    "pbt.perturb=[learning_rate, discount]",
    "pbt.resample_probability=0.5",
    "ppo.discount=[0.9, 0.95, 0.99, 0.999]",
)


@pytest.mark.slow
@pytest.mark.parametrize("overrides", [(), PBT, GRU_PBT], ids=["plain", "pbt", "gru-pbt"])
def test_a_resumed_population_continues_as_an_uninterrupted_one(tmp_path, overrides):
    """With PBT, the exploit at 128 is in the checkpoint of 128, its settings too."""
    train(_debug(*overrides), tmp_path / "whole", progress=quiet)
    train(_debug(*overrides, "train.total_steps=128"), tmp_path / "resumed", progress=quiet)
    result = train(_debug(*overrides), tmp_path / "resumed", progress=quiet)
    assert result["step"] == 256
    np.testing.assert_array_equal(
        _policy_params(tmp_path / "resumed"), _policy_params(tmp_path / "whole")
    )
    if overrides:
        reader = tf.train.load_checkpoint(str(tmp_path / "resumed" / "checkpoints"))
        rates = reader.get_tensor("algo/pbt_settings/learning_rate/.ATTRIBUTES/VARIABLE_VALUE")
        whole = tf.train.load_checkpoint(str(tmp_path / "whole" / "checkpoints"))
        expected = whole.get_tensor("algo/pbt_settings/learning_rate/.ATTRIBUTES/VARIABLE_VALUE")
        np.testing.assert_array_equal(rates, expected)
        assert len(set(rates.tolist())) > 1  # Perturbed at 128 and at 256.
        lines = (tmp_path / "resumed" / "pbt.jsonl").read_text()
        assert lines == (tmp_path / "whole" / "pbt.jsonl").read_text()


def test_a_resumed_run_keeps_its_population(tmp_path):
    save_config(_debug(), tmp_path / "config.yaml")  # A run of 3 members.
    with pytest.raises(ConfigError, match="train.population differ"):
        train(_debug("train.population=2"), tmp_path, progress=quiet)


@pytest.mark.slow
def test_a_population_of_four_learns_cartpole(tmp_path):
    """3 of 4 members evaluate at 150 or more on Gymnasium's CartPole-v1 after 8,192 steps.

    cartpole_tf, each member's 16 environments, XLA. Calibrated on 2026-11-26 (seeds 0
    to 3): final evaluations 500.0, 379.9, 170.8, 285.6.
    """
    config = load_run_config(
        "cartpole_tf",
        ["train.population=4", "train.total_steps=8192", "train.eval_every=8192"],
    )
    result = train(config, tmp_path, progress=quiet)
    returns = [row["eval_return"] for row in result["members"]]
    assert sum(value >= 150 for value in returns) >= 3, returns


def test_population_based_training_logs_its_lineage(tmp_path):
    config = _debug(
        "train.population=4",
        "pbt.interval=128",
        "pbt.perturb=[learning_rate]",
        "ppo.learning_rate=[1e-3, 2e-3, 3e-3, 4e-3]",
    )
    result = train(config, tmp_path, progress=quiet)
    lines = [json.loads(line) for line in (tmp_path / "pbt.jsonl").read_text().splitlines()]
    # At 128 and 256: a quarter of 4 members, one, takes another's state.
    assert [line["step"] for line in lines] == [128, 256]
    for line in lines:
        assert line["parent"] != line["member"]
        assert 0.8e-3 <= line["ppo.learning_rate"] <= 4.8e-3
    last = lines[-1]
    row = result["members"][last["member"]]
    assert row["ppo.learning_rate"] == pytest.approx(last["ppo.learning_rate"])
    member = f"member-{last['member']:02d}"
    parents = scalars(tmp_path / member / "train", "pbt/parent")
    assert parents[-1] == (256, last["parent"])
    rates = scalars(tmp_path / member / "train", "pbt/learning_rate")
    assert rates[-1] == (256, pytest.approx(last["ppo.learning_rate"]))
    # The final evaluation after the exploit at the end scores the new members again.
    evaluations = scalars(tmp_path / member / "eval", "eval/mean_return")
    assert [step for step, _ in evaluations] == [128, 256, 256]
    assert row["eval_return"] == pytest.approx(evaluations[-1][1])


def test_a_recurrent_population_trains_evaluates_and_exports_each_member(tmp_path):
    config = _debug("network.name=lstm", "network.recurrent_units=8", "train.total_steps=128")
    result = train(config, tmp_path, progress=quiet)
    assert result["step"] == 128 and len(result["members"]) == 3
    assert all(math.isfinite(row["eval_return"]) for row in result["members"])
    policy = tf.saved_model.load(str(tmp_path / "policies" / "member-02"))
    state = policy.initial_state(2)
    output = policy(tf.zeros([2, 4]), state)
    assert output["action"].shape == (2,) and output["state"].shape == state.shape
