"""A population's aggregate over members, its best member and its table."""

import math

import numpy as np
import pytest

from batchrl.training.member_logs import MemberLogs, aggregate, describe_aggregate


def test_aggregate_of_a_hand_computed_example():
    """Returns 0, 0, 0, 4: the mean of a resample of 4 is K, K ~ Binomial(4, 1/4).

    P(K <= 0, 1, 2, 3) = 0.316, 0.738, 0.949, 0.996: the 2.5th percentile of the
    bootstrap means is 0 and the 97.5th is 3. IQM: the middle two of 0, 0, 0, 4 are 0.
    """
    result = aggregate([4.0, 0.0, 0.0, 0.0])
    assert result == {"members": 4, "mean": 1.0, "iqm": 0.0, "ci_low": 0.0, "ci_high": 3.0}


def test_interquartile_mean_drops_a_quarter_at_each_end():
    # n = 5: floor(5 / 4) = 1 from each end (scipy.stats.trim_mean(x, 0.25)), mean of 2, 3, 4.
    assert aggregate([100.0, 1.0, 3.0, 2.0, 4.0])["iqm"] == 3.0
    # n = 8: 2 from each end, the mean of 3, 4, 5, 6.
    assert aggregate(np.arange(1.0, 9.0))["iqm"] == 4.5
    assert aggregate([7.0])["iqm"] == 7.0


def test_bootstrap_interval_of_two_and_of_equal_returns():
    # Resamples of 0 and 10 have means 0, 5 and 10 with probabilities 1/4, 1/2, 1/4.
    result = aggregate([0.0, 10.0])
    assert (result["ci_low"], result["ci_high"]) == (0.0, 10.0)
    result = aggregate([5.0, 5.0, 5.0])
    assert (result["mean"], result["iqm"], result["ci_low"], result["ci_high"]) == (5, 5, 5, 5)


def test_the_bootstrap_is_seeded_and_leaves_out_nan():
    returns = np.random.default_rng(3).normal(size=16)
    assert aggregate(returns) == aggregate(returns)
    first = aggregate(returns)
    assert first["ci_low"] < first["mean"] < first["ci_high"]
    assert aggregate([*returns, math.nan])["members"] == 16
    assert aggregate([*returns, math.nan]) == first
    empty = aggregate([math.nan])
    assert empty["members"] == 0 and math.isnan(empty["mean"])
    assert describe_aggregate(aggregate([0.0, 0.0, 0.0, 4.0])) == (
        "Final evaluation over 4 members: mean 1.0, IQM 0.0, 95% bootstrap interval of the "
        "mean [0.0, 3.0]"
    )


def test_best_member_and_table(tmp_path):
    logs = MemberLogs(tmp_path, [4, 9], [{"ppo.learning_rate": 1e-3}, {"ppo.learning_rate": 3e-4}])
    assert logs.best() == 0  # Nothing yet.
    logs.train_returns = [1.0, 2.0]
    assert logs.best() == 1  # By training return, before any evaluation.
    logs.eval({"member_returns": [5.0, math.nan]}, step=1)
    assert logs.best() == 0
    assert logs.members()[1] == {
        "member": 1,
        "seed": 9,
        "ppo.learning_rate": 3e-4,
        "train_return": 2.0,
        "eval_return": pytest.approx(math.nan, nan_ok=True),
    }
    lines = logs.table().splitlines()
    assert lines[0].split() == [
        "member",
        "seed",
        "ppo.learning_rate",
        "train",
        "return",
        "eval",
        "return",
    ]
    assert lines[1].split() == ["0", "4", "0.001", "1.0", "5.0"]
    assert lines[2].split() == ["1", "9", "0.0003", "2.0", "-"]  # No evaluation seen.
    assert logs.table(returns=False).splitlines()[2].split() == ["1", "9", "0.0003"]
