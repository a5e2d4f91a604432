"""Polyak averaging of target variables."""

import numpy as np
import pytest
import tensorflow as tf

from batchrl.parts.polyak import polyak


def test_polyak_moves_toward_the_source_and_copies_at_tau_one():
    target, source = tf.Variable([0.0, 10.0]), tf.Variable([1.0, 0.0])
    polyak([target], [source], 0.25)
    np.testing.assert_allclose(target, [0.25, 7.5])
    polyak([target], [source], 1.0)
    np.testing.assert_allclose(target, [1.0, 0.0])
    with pytest.raises(ValueError, match="1 target variables for 2 source"):
        polyak([target], [source, source], 1.0)
