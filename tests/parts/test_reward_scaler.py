"""Exact-value tests of RewardScaler: the return it tracks, the scale, and checkpoints."""

import numpy as np
import pytest
import tensorflow as tf

from batchrl.parts import RewardScaler

# B=2 agents, discount 0.5, no clipping. R is each agent's discounted return; the scale
# is the population std of every R seen so far, this step's included.
#   step 1: r = [1, 2]             R = [1, 2]      R seen {1, 2}: std 0.5
#           scaled = [2, 4]
#   step 2: r = [2, 0], agent 1 done
#                                  R = [2.5, 1]    R seen {1, 2, 2.5, 1}: std sqrt(0.421875)
#           scaled = [2 / 0.6495190528, 0] = [3.0792014, 0]; agent 1's R restarts at 0
#   step 3: agent 1 alone, r = 3   R_1 = 3         R seen {1, 2, 2.5, 1, 3}: std 0.8
#           scaled = 3 / 0.8 = 3.75, or 3.5 with clip 3.5
STEPS = [
    ([0, 1], [1.0, 2.0], [False, False], [2.0, 4.0]),
    ([0, 1], [2.0, 0.0], [False, True], [3.0792014, 0.0]),
    ([1], [3.0], [False], [3.75]),
]


@pytest.mark.parametrize("mode", ["eager", "function"])
@pytest.mark.parametrize("clip", [None, 3.5])
def test_scales_by_the_std_of_the_discounted_return(mode, clip):
    scaler = RewardScaler(2, discount=0.5, clip=clip)
    scale = scaler.scale if mode == "eager" else tf.function(scaler.scale)
    for indices, reward, done, expected in STEPS:
        if clip is not None:
            expected = np.minimum(expected, clip)
        scaled = scale(tf.constant(indices), tf.constant(reward), tf.constant(done))
        np.testing.assert_allclose(scaled, expected, rtol=1e-6)
    np.testing.assert_allclose(scaler.discounted_return, [2.5, 3.0])
    np.testing.assert_allclose(scaler.normalizer.std, 0.8, rtol=1e-12)


def test_survives_a_checkpoint(tmp_path):
    scaler = RewardScaler(2, discount=0.5)
    for indices, reward, done, _ in STEPS:
        scaler.scale(tf.constant(indices), tf.constant(reward), tf.constant(done))
    path = tf.train.Checkpoint(scaler=scaler).save(str(tmp_path / "ckpt"))
    restored = RewardScaler(2, discount=0.5)
    tf.train.Checkpoint(scaler=restored).restore(path).assert_existing_objects_matched()
    np.testing.assert_array_equal(restored.discounted_return, [2.5, 3.0])
    assert float(restored.normalizer.count) == 5
    np.testing.assert_allclose(restored.normalizer.mean, 1.9, rtol=1e-12)
