"""Population-based training's exploit (who copies whom) and explore (perturb) steps."""

import numpy as np
import pytest
import tensorflow as tf

from batchrl.parts import pbt


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "tf.function"])
def test_the_bottom_member_copies_the_top_one(graph):
    exploit = tf.function(pbt.exploit, autograph=False) if graph else pbt.exploit
    rng = tf.random.Generator.from_seed(0)
    # Scores 3, 1, 4, 2: a quarter of 4 is one member; member 1 (1) takes member 2 (4).
    source, copied = exploit(tf.constant([3.0, 1.0, 4.0, 2.0]), 0.25, rng)
    np.testing.assert_array_equal(source, [0, 2, 2, 3])
    np.testing.assert_array_equal(copied, [False, True, False, False])
    # NaN (never evaluated) ranks lowest.
    source, _ = exploit(tf.constant([3.0, 1.0, np.nan, 2.0]), 0.25, rng)
    np.testing.assert_array_equal(source, [0, 1, 0, 3])


def test_each_bottom_member_copies_one_of_the_top_quarter():
    rng = tf.random.Generator.from_seed(1)
    scores = tf.constant([5.0, 0.0, 7.0, 1.0, 6.0, 2.0, 3.0, 4.0])  # Bottom: 1, 3. Top: 2, 4.
    parents = set()
    for _ in range(20):
        source, copied = pbt.exploit(scores, 0.25, rng)
        source = source.numpy()
        np.testing.assert_array_equal(np.flatnonzero(copied), [1, 3])
        assert set(source[[1, 3]]) <= {2, 4}
        np.testing.assert_array_equal(source[[0, 2, 4, 5, 6, 7]], [0, 2, 4, 5, 6, 7])
        parents.update(source[[1, 3]])
    assert parents == {2, 4}


def test_perturb_multiplies_only_copied_members_within_bounds():
    rng = tf.random.Generator.from_seed(2)
    values = np.float32([0.5, 0.9, 0.2, 1.0])
    copied = tf.constant([True, True, False, True])
    factors = np.float32([0.8, 1.2])
    seen = {m: set() for m in range(4)}
    for _ in range(20):
        new = pbt.perturb(values, copied, (0.8, 1.2), rng, 0.0, 1.0).numpy()
        for m in range(4):
            seen[m].add(float(new[m]))
    assert seen[2] == {float(values[2])}  # Not copied: unchanged.
    assert seen[0] == {float(values[0] * f) for f in factors}
    assert seen[1] == {float(values[1] * factors[0]), 1.0}  # 0.9 * 1.2 clipped to 1.
    assert seen[3] == {float(factors[0]), 1.0}


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "tf.function"])
def test_resample_with_probability_one_draws_every_copied_value_from_the_choices(graph):
    resample = tf.function(pbt.resample, autograph=False) if graph else pbt.resample
    rng = tf.random.Generator.from_seed(3)
    values = np.float32([0.5, 0.9, 0.2, 0.7])
    copied = tf.constant([True, True, False, True])
    choices = (0.1, 0.3, 2.0)  # 2.0 is clipped to the range's top, 1.
    allowed = {float(np.float32(0.1)), float(np.float32(0.3)), 1.0}
    seen = set()
    for _ in range(30):
        new = resample(values, copied, choices, 1.0, rng, 0.0, 1.0).numpy()
        assert new[2] == values[2]  # Not copied: unchanged.
        assert set(new[[0, 1, 3]].tolist()) <= allowed
        seen.update(new[[0, 1, 3]].tolist())
    assert seen == allowed  # Each choice comes up.


def test_resample_with_probability_zero_keeps_every_value():
    rng = tf.random.Generator.from_seed(4)
    values = np.float32([0.5, 0.9, 0.2])
    copied = tf.constant([True, True, False])
    for _ in range(10):
        new = pbt.resample(values, copied, (0.1, 0.3), 0.0, rng, 0.0, 1.0)
        np.testing.assert_array_equal(new, values)


def test_resample_with_probability_half_resamples_about_half():
    rng = tf.random.Generator.from_seed(5)
    values = np.full([1000], 0.5, np.float32)
    copied = tf.ones([1000], tf.bool)
    new = pbt.resample(values, copied, (0.25,), 0.5, rng).numpy()
    assert set(new.tolist()) == {0.5, 0.25}
    assert 0.45 < np.mean(new == 0.25) < 0.55  # 1000 coins: 3 standard deviations.
