"""Tests of the streaming normalizer: statistics, normalization and checkpoints."""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.util import event_pb2

from batchrl.parts.normalizer import StreamingNormalizer

MODES = ["eager", "function"]


def compile_fn(fn, mode):
    return fn if mode == "eager" else tf.function(fn)


@pytest.mark.parametrize("mode", MODES)
def test_statistics_match_numpy_over_concatenation(mode):
    rng = np.random.default_rng(0)
    normalizer = StreamingNormalizer([2])
    update = compile_fn(normalizer.update, mode)
    batches = [
        rng.normal([3.0, -2.0], [2.0, 0.5], size=(size, 2)).astype(np.float32)
        for size in (1, 5, 0, 3, 7, 64)
    ]
    for batch in batches:
        update(tf.constant(batch))
    data = np.concatenate(batches).astype(np.float64)
    assert normalizer.count.numpy() == 80
    np.testing.assert_allclose(normalizer.mean.numpy(), data.mean(0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(normalizer.std.numpy(), data.std(0), rtol=1e-6, atol=1e-6)


def test_statistics_keep_precision_with_large_offset():
    # float64 statistics: values around 1e4 with std 1e-2 still give the right std.
    rng = np.random.default_rng(1)
    normalizer = StreamingNormalizer()
    batches = [1e4 + 1e-2 * rng.standard_normal(size) for size in (10, 100, 1000)]
    for batch in batches:
        normalizer.update(tf.constant(batch))
    data = np.concatenate(batches)
    np.testing.assert_allclose(normalizer.std.numpy(), data.std(), rtol=1e-6)


def test_initial_statistics_are_identity():
    normalizer = StreamingNormalizer([3], clip=None)
    np.testing.assert_array_equal(normalizer.mean.numpy(), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(normalizer.std.numpy(), [1.0, 1.0, 1.0])
    value = tf.constant([[1.0, -2.0, 30.0]])
    np.testing.assert_allclose(normalizer.normalize(value).numpy(), value.numpy())
    # One value has no spread yet: the std stays 1 while the mean moves.
    normalizer.update(tf.constant([[1.0, 2.0, 3.0]]))
    np.testing.assert_array_equal(normalizer.mean.numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(normalizer.std.numpy(), [1.0, 1.0, 1.0])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "center, scale, clip, expected",
    [
        # Statistics of [1, 3]: mean 2, std 1. Inputs [2, 4, 30, -30].
        (True, True, 10.0, [0.0, 2.0, 10.0, -10.0]),
        (True, True, None, [0.0, 2.0, 28.0, -32.0]),
        (False, True, 10.0, [2.0, 4.0, 10.0, -10.0]),  # rewards: scale only
        (True, False, 10.0, [0.0, 2.0, 10.0, -10.0]),
        (True, False, 30.0, [0.0, 2.0, 28.0, -30.0]),
        (False, False, 5.0, [2.0, 4.0, 5.0, -5.0]),
    ],
)
def test_normalize(mode, center, scale, clip, expected):
    normalizer = StreamingNormalizer(center=center, scale=scale, clip=clip)
    compile_fn(normalizer.update, mode)(tf.constant([1.0, 3.0]))
    normalize = compile_fn(normalizer.normalize, mode)
    result = normalize(tf.constant([2.0, 4.0, 30.0, -30.0]))
    assert result.dtype == tf.float32
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-6)


def test_normalize_broadcasts_over_leading_axes():
    normalizer = StreamingNormalizer([2])
    normalizer.update(tf.constant([[0.0, 10.0], [2.0, 30.0]]))  # mean [1, 20], std [1, 10]
    result = normalizer.normalize(tf.constant([[[1.0, 20.0], [3.0, 0.0]]]))  # [1, 2, 2]
    np.testing.assert_allclose(result.numpy(), [[[0.0, 0.0], [2.0, -2.0]]], rtol=1e-6)


def test_checkpoint_round_trip(tmp_path):
    rng = np.random.default_rng(2)
    normalizer = StreamingNormalizer([2], center=False)
    for size in (4, 9):
        normalizer.update(tf.constant(rng.normal(5.0, 3.0, (size, 2)), tf.float32))
    path = tf.train.Checkpoint(normalizer=normalizer).write(str(tmp_path / "ckpt"))

    restored = StreamingNormalizer([2], center=False)
    assert restored.count.numpy() == 0
    tf.train.Checkpoint(normalizer=restored).read(path).assert_consumed()
    assert restored.count.numpy() == 13
    np.testing.assert_array_equal(restored.mean.numpy(), normalizer.mean.numpy())
    np.testing.assert_array_equal(restored.std.numpy(), normalizer.std.numpy())
    value = tf.constant([[1.0, 2.0]])
    np.testing.assert_array_equal(
        restored.normalize(value).numpy(), normalizer.normalize(value).numpy()
    )


def test_variables_are_not_trainable():
    normalizer = StreamingNormalizer([2])
    assert len(normalizer.variables) == 3
    assert normalizer.trainable_variables == ()


def test_summary_writes(tmp_path):
    normalizer = StreamingNormalizer([2], name="observ")
    normalizer.update(tf.constant([[0.0, 1.0], [2.0, 3.0]]))
    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default():
        normalizer.summary(step=1)
    writer.flush()
    tags = set()
    for event_file in tmp_path.iterdir():
        for record in tf.data.TFRecordDataset(str(event_file)):
            event = event_pb2.Event.FromString(record.numpy())
            tags.update(value.tag for value in event.summary.value)
    assert {"observ/count", "observ/mean", "observ/std"} <= tags
