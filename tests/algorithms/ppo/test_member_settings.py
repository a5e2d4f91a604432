"""A population's own settings: lists as tensors [M], PBT's variables, explore steps."""

import numpy as np
import pytest
import tensorflow as tf

from batchrl.algorithms.ppo.member_settings import MemberSettings
from batchrl.config import load_run_config
from batchrl.parts import pbt

LISTED = ["ppo.learning_rate=[1e-3, 3e-4, 3e-4, 1e-4]", "ppo.gae_lambda=[0.9, 0.95, 0.99, 0.8]"]


def _cfg(*overrides):
    return load_run_config("cartpole_tf", ["train.population=4", *LISTED, *overrides]).ppo


def test_listed_keys_are_tensors_and_shared_keys_floats():
    settings = MemberSettings(_cfg(), ("entropy_coef",), 4)
    np.testing.assert_allclose(settings.get("learning_rate"), [1e-3, 3e-4, 3e-4, 1e-4])
    assert settings.get("discount") == pytest.approx(0.99)  # cartpole_tf's, shared
    assert set(settings.varying()) == {"learning_rate", "gae_lambda", "entropy_coef"}
    assert settings.live("entropy_coef") is settings.variables["entropy_coef"]


def test_with_resample_probability_zero_explore_is_perturb_exactly():
    """Probability 0 draws nothing more: the values and the stream are today's."""
    keys = ("learning_rate", "gae_lambda")
    settings = MemberSettings(_cfg(), keys, 4, resample_probability=0.0)
    source, copied = tf.constant([0, 2, 2, 3]), tf.constant([False, True, False, False])
    rng, reference = tf.random.Generator.from_seed(7), tf.random.Generator.from_seed(7)
    expected = {}
    for key in keys:
        parent = tf.gather(settings.variables[key], source)
        low, high = (0.0, float("inf")) if key == "learning_rate" else (0.0, 1.0)
        expected[key] = pbt.perturb(parent, copied, (0.8, 1.2), reference, low, high)
    settings.explore(source, copied, (0.8, 1.2), rng)
    for key in keys:
        np.testing.assert_array_equal(settings.variables[key], expected[key])
    np.testing.assert_array_equal(rng.state, reference.state)


def test_with_resample_probability_one_copied_members_take_given_values():
    keys = ("learning_rate", "gae_lambda", "entropy_coef")
    settings = MemberSettings(_cfg("ppo.entropy_coef=0.01"), keys, 4, resample_probability=1.0)
    assert settings.choices["learning_rate"] == [1e-4, 3e-4, 1e-3]  # Distinct, sorted.
    assert settings.choices["entropy_coef"] == [0.01]  # A single value: that one.
    source, copied = tf.constant([0, 0, 2, 0]), tf.constant([False, True, False, True])
    rng = tf.random.Generator.from_seed(8)
    seen = set()
    for _ in range(20):
        before = {key: settings.variables[key].numpy() for key in keys}
        settings.explore(source, copied, (0.8, 1.2), rng)
        for key in keys:
            after = settings.variables[key].numpy()
            allowed = np.float32(settings.choices[key])
            assert np.isin(after[[1, 3]], allowed).all(), (key, after)
            np.testing.assert_array_equal(after[[0, 2]], before[key][[0, 2]])
        seen.update(settings.variables["learning_rate"].numpy()[[1, 3]].tolist())
    assert len(seen) == 3


def test_with_pbt_on_a_copied_member_inherits_its_parents_listed_settings():
    """inherit: the listed keys are variables; a copy takes them all, perturbs its own."""
    settings = MemberSettings(_cfg(), ("entropy_coef",), 4, inherit=True)
    assert set(settings.variables) == {"learning_rate", "gae_lambda", "entropy_coef"}
    source, copied = tf.constant([0, 0, 2, 3]), tf.constant([False, True, False, False])
    settings.explore(source, copied, (2.0,), tf.random.Generator.from_seed(9))
    values = settings.values()
    np.testing.assert_allclose(values["ppo.learning_rate"], [1e-3, 1e-3, 3e-4, 1e-4])
    np.testing.assert_allclose(values["ppo.gae_lambda"], [0.9, 0.9, 0.99, 0.8])
    np.testing.assert_allclose(values["ppo.entropy_coef"], [0.01, 0.02, 0.01, 0.01])
    np.testing.assert_allclose(settings.varying()["gae_lambda"], [0.9, 0.9, 0.99, 0.8])
    # Without PBT the listed keys stay constants.
    assert set(MemberSettings(_cfg(), (), 4).variables) == set()
