"""Learning-rate schedules: golden values."""

import numpy as np
import pytest
import tensorflow as tf

from batchrl.parts.schedules import learning_rate


@pytest.mark.parametrize(
    "step, expected",
    [(0, 0.02), (25, 0.01625), (50, 0.0125), (100, 0.005), (150, 0.005)],
)
def test_linear_falls_to_final_and_stays(step, expected):
    rate = learning_rate(0.02, "linear", tf.constant(step, tf.int64), 100, final=0.005)
    np.testing.assert_allclose(float(rate), expected, rtol=1e-6)


def test_linear_without_final_reaches_zero_and_constant_ignores_the_step():
    assert float(learning_rate(3e-4, "linear", tf.Variable(1000), 1000)) == 0.0
    assert float(learning_rate(3e-4, "linear", tf.Variable(250), 1000)) == pytest.approx(2.25e-4)
    assert float(learning_rate(3e-4, "constant", tf.Variable(999), 1000)) == pytest.approx(3e-4)
    assert float(learning_rate(3e-4, "linear", None, 1000)) == pytest.approx(3e-4)


def test_unknown_schedule_names_the_choices():
    with pytest.raises(ValueError, match=r"'cosine'.*\['constant', 'linear'\]"):
        learning_rate(1e-3, "cosine", None, 10)
