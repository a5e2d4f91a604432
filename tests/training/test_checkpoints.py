"""Tests for resuming from checkpoints: fall back past unreadable files, stop on a mismatch."""

import pytest
import tensorflow as tf

from batchrl.training.checkpoints import CheckpointError, Checkpoints


class _Model(tf.Module):
    def __init__(self, shape=(2,), bias=False):
        super().__init__()
        self.weights = tf.Variable(tf.fill(shape, 1.0))
        if bias:
            self.bias = tf.Variable(tf.zeros(3))


def _saved(folder, model=None):
    """Checkpoints 1 and 2 of a model whose weights are the checkpoint's number."""
    model = model or _Model()
    checkpoints = Checkpoints(tf.train.Checkpoint(algo=model), folder)
    for number in (1, 2):
        model.weights.assign(tf.fill(model.weights.shape, float(number)))
        checkpoints.save(number)
    return folder


def _restore(folder, model):
    messages = []
    prefix = Checkpoints(tf.train.Checkpoint(algo=model), folder).restore(messages.append)
    return prefix, messages


def test_restores_the_newest(tmp_path):
    model = _Model()
    prefix, messages = _restore(_saved(tmp_path), model)
    assert prefix.endswith("ckpt-2") and not messages
    assert model.weights.numpy().tolist() == [2.0, 2.0]


def test_truncated_data_falls_back_to_the_previous_checkpoint(tmp_path):
    data = _saved(tmp_path) / "ckpt-2.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:10])
    model = _Model()
    prefix, messages = _restore(tmp_path, model)
    assert prefix.endswith("ckpt-1")
    assert "Cannot read checkpoint" in messages[0] and "ckpt-2" in messages[0]
    assert model.weights.numpy().tolist() == [1.0, 1.0]


def test_missing_index_falls_back_to_the_previous_checkpoint(tmp_path):
    (_saved(tmp_path) / "ckpt-2.index").unlink()
    (tmp_path / "ckpt-2.index").write_bytes(b"garbage")
    prefix, _ = _restore(tmp_path, _Model())
    assert prefix.endswith("ckpt-1")


def test_another_shape_stops_instead_of_falling_back(tmp_path):
    model = _Model(shape=(3,))
    with pytest.raises(CheckpointError) as raised:
        _restore(_saved(tmp_path), model)
    message = str(raised.value)
    assert "ckpt-2 reads, but does not fit the model" in message
    assert "algo/weights [2] float32 -> [3] float32" in message
    assert "ckpt-1" not in message
    assert "\n" not in message  # The train script prints it as one line.


def test_a_variable_the_checkpoint_lacks_stops_instead_of_falling_back(tmp_path):
    with pytest.raises(CheckpointError, match=r"in the model only: algo/bias \[3\] float32"):
        _restore(_saved(tmp_path), _Model(bias=True))


def test_a_variable_the_model_lacks_is_named_with_the_mismatch(tmp_path):
    _saved(tmp_path, _Model(bias=True))
    with pytest.raises(CheckpointError) as raised:
        _restore(tmp_path, _Model(shape=(3,)))
    assert "in the checkpoint only: algo/bias [3] float32" in str(raised.value)
    assert "algo/weights [2] float32 -> [3] float32" in str(raised.value)


def test_the_old_layout_is_accepted_when_allowed(tmp_path):
    model = _Model(bias=True)
    checkpoints = Checkpoints(tf.train.Checkpoint(algo=model), _saved(tmp_path))
    assert checkpoints.restore(print, allow_partial=lambda prefix, error: True).endswith("2")
    assert model.weights.numpy().tolist() == [2.0, 2.0]
