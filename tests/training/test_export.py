"""Tests for exporting a policy as a SavedModel."""

import os

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from batchrl.training import export
from batchrl.training.export import export_policy

SPACE = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


class _Scale(tf.Module):
    """A policy whose action is its observation times a constant."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = tf.Variable(scale)

    def act(self, observ, deterministic=True):
        return observ * self.scale


def _act(path):
    return tf.saved_model.load(str(path))(tf.ones((1, 2))).numpy()  # [1, 2]


def test_export_replaces_the_policy(tmp_path):
    export_policy(_Scale(1.0), SPACE, tmp_path / "policy")
    export_policy(_Scale(2.0), SPACE, tmp_path / "policy", {"step": 7})
    np.testing.assert_array_equal(_act(tmp_path / "policy"), [[2.0, 2.0]])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy"]


def test_a_failure_after_moving_the_old_policy_aside_puts_it_back(tmp_path, monkeypatch):
    export_policy(_Scale(1.0), SPACE, tmp_path / "policy")
    replace = os.replace

    def fail_on_staging(src, dst):
        # The old policy is moved to policy.old first; the move of the new one fails.
        if os.path.basename(src).startswith("policy.") and not str(src).endswith(".old"):
            raise OSError("disk full")
        replace(src, dst)

    monkeypatch.setattr(export.os, "replace", fail_on_staging)
    with pytest.raises(OSError, match="disk full"):
        export_policy(_Scale(2.0), SPACE, tmp_path / "policy")
    np.testing.assert_array_equal(_act(tmp_path / "policy"), [[1.0, 1.0]])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy"]


def test_a_policy_left_aside_by_a_kill_is_moved_back_first(tmp_path, monkeypatch):
    """A kill between the two moves leaves only policy.old: the next export restores it,
    so that a failure of that export still leaves the run a policy."""
    export_policy(_Scale(1.0), SPACE, tmp_path / "policy")
    os.replace(tmp_path / "policy", tmp_path / "policy.old")  # As a kill -9 would leave it.

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(export.tf.saved_model, "save", fail)
    with pytest.raises(OSError, match="disk full"):
        export_policy(_Scale(2.0), SPACE, tmp_path / "policy")
    np.testing.assert_array_equal(_act(tmp_path / "policy"), [[1.0, 1.0]])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy"]
