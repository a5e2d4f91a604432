"""What both replay buffers share: the ring, gathering, seeds, checkpoints, graph and XLA."""

import numpy as np
import pytest
import tensorflow as tf

from batchrl.replay import PrioritizedReplay, UniformReplay

MODES = ["eager", "function", "xla"]
BUFFERS = [UniformReplay, PrioritizedReplay]
# One item: a uint8 frame, an action, and a nested pair.
SPEC = {
    "observ": tf.TensorSpec([2], tf.uint8),
    "action": tf.TensorSpec([], tf.int32),
    "extra": (tf.TensorSpec([], tf.float32), tf.TensorSpec([], tf.bool)),
}


def make_items(numbers) -> dict:
    """Items that all derive from their number, which is also their action."""
    numbers = np.asarray(numbers)
    return {
        "observ": np.stack([numbers % 256, (3 * numbers) % 256], 1).astype(np.uint8),
        "action": numbers.astype(np.int32),
        "extra": ((0.5 * numbers).astype(np.float32), numbers % 2 == 0),
    }


def assert_items_equal(items, numbers):
    expected = make_items(numbers)
    for got, want in zip(tf.nest.flatten(items), tf.nest.flatten(expected)):
        assert got.dtype == tf.as_dtype(want.dtype)
        np.testing.assert_array_equal(got.numpy(), want)


def compile_fn(fn, mode):
    if mode == "eager":
        return fn
    return tf.function(fn, jit_compile=mode == "xla")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("buffer_class", BUFFERS)
def test_the_ring_wraps_around_and_overwrites_the_oldest(buffer_class, mode):
    buffer = buffer_class(5, SPEC)
    add = compile_fn(buffer.add, mode)
    assert buffer.capacity == 5 and buffer.size().numpy() == 0
    # Items 0-2 go to slots 0-2, items 3-5 to slots 3, 4, 0, items 6-8 to slots 1-3.
    slots = [add(make_items(range(first, first + 3))).numpy() for first in (0, 3, 6)]
    np.testing.assert_array_equal(slots, [[0, 1, 2], [3, 4, 0], [1, 2, 3]])
    assert buffer.size().numpy() == 5 and buffer.size().dtype == tf.int32
    assert_items_equal(buffer.ring.read(tf.range(5)), [5, 6, 7, 8, 4])
    # One item at a time, and a whole ring at once.
    add(make_items([9]))
    add(make_items(range(10, 15)))
    assert_items_equal(buffer.ring.read(tf.range(5)), [10, 11, 12, 13, 14])
    assert buffer.size().numpy() == 5


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("buffer_class", BUFFERS)
def test_sampled_items_are_the_ones_added_at_their_indices(buffer_class, mode):
    buffer = buffer_class(10, SPEC, seed=1)
    add, sample = compile_fn(buffer.add, mode), compile_fn(buffer.sample, mode)
    add(make_items(range(4)))
    indices, weights, items = sample(64, 0.5)
    assert indices.dtype == tf.int32 and weights.dtype == tf.float32
    assert set(indices.numpy()) == {0, 1, 2, 3}  # 64 draws miss none of 4 equal items
    assert_items_equal(items, indices.numpy())
    np.testing.assert_array_equal(weights.numpy(), np.ones(64))  # equal priorities
    add(make_items(range(4, 13)))  # slots 4-9, then 0-2: slot s holds s + 10 below 3
    indices, _, items = sample(64, 0.5)
    numbers = np.where(indices.numpy() < 3, indices.numpy() + 10, indices.numpy())
    assert_items_equal(items, numbers)


@pytest.mark.parametrize("buffer_class", BUFFERS)
def test_the_same_seed_samples_the_same_and_another_seed_not(buffer_class):
    def draws(seed):
        buffer = buffer_class(100, SPEC, seed=seed)
        buffer.add(make_items(range(100)))
        return np.stack([buffer.sample(16, 0.5)[0].numpy() for _ in range(3)])

    first = draws(3)
    np.testing.assert_array_equal(draws(3), first)
    assert not np.array_equal(draws(4), first)
    assert not np.array_equal(first[0], first[1])  # each sample draws anew


@pytest.mark.parametrize("buffer_class", BUFFERS)
def test_add_checks_the_structure_and_the_count(buffer_class):
    buffer = buffer_class(4, SPEC)
    with pytest.raises(ValueError, match="K must be"):
        buffer.add(make_items(range(5)))
    items = make_items(range(2))
    items["observ"] = np.zeros([2, 3], np.uint8)
    with pytest.raises(ValueError, match="expected"):
        buffer.add(items)
    with pytest.raises((ValueError, TypeError)):
        buffer.add({"observ": np.zeros([2, 2], np.uint8), "action": np.zeros(2, np.int32)})
    assert buffer.size().numpy() == 0


@pytest.mark.parametrize("mode", ["function", "xla"])
@pytest.mark.parametrize("buffer_class", BUFFERS)
def test_sampling_an_empty_buffer_raises_eagerly_and_returns_zeros_in_a_graph(buffer_class, mode):
    buffer = buffer_class(4, SPEC)
    with pytest.raises(ValueError, match="empty"):
        buffer.sample(3, 0.5)
    indices, weights, items = compile_fn(buffer.sample, mode)(3, 0.5)
    np.testing.assert_array_equal(indices.numpy(), [0, 0, 0])
    np.testing.assert_array_equal(weights.numpy(), [1.0, 1.0, 1.0])
    assert all(not np.any(leaf.numpy()) for leaf in tf.nest.flatten(items))


def run_scenario(buffer, mode):
    """Adds, samples and updates priorities in one mode; returns every output."""
    add = compile_fn(buffer.add, mode)
    sample = compile_fn(buffer.sample, mode)
    update = compile_fn(buffer.update_priorities, mode)
    outputs = []
    for first in (0, 3, 6):
        outputs.append(add(make_items(range(first, first + 3))))
        indices, weights, items = sample(6, 0.4)
        outputs += [indices, weights, *tf.nest.flatten(items)]
        update(indices, tf.cast(indices, tf.float32) * 0.7 + 0.1)
    outputs.append(add(make_items(range(9, 11)), tf.constant([3.0, 0.2])))
    indices, weights, items = sample(6, 1.0)
    return [*outputs, indices, weights, *tf.nest.flatten(items), buffer.size()]


@pytest.mark.parametrize("buffer_class", BUFFERS)
def test_graph_and_xla_give_what_eager_gives(buffer_class):
    results = {mode: run_scenario(buffer_class(7, SPEC, seed=5), mode) for mode in MODES}
    for mode in ("function", "xla"):
        for got, want in zip(results[mode], results["eager"]):
            if want.dtype.is_floating:
                np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
            else:
                np.testing.assert_array_equal(got.numpy(), want.numpy())
    if buffer_class is PrioritizedReplay:  # the last weights (before 4 leaves and the size)
        assert not np.all(results["eager"][-6].numpy() == 1.0)


@pytest.mark.parametrize("buffer_class", BUFFERS)
def test_a_restored_buffer_samples_what_the_saved_one_would(buffer_class, tmp_path):
    buffer = buffer_class(7, SPEC, seed=2)
    run_scenario(buffer, "eager")
    path = tf.train.Checkpoint(replay=buffer).save(str(tmp_path / "replay"))
    restored = buffer_class(7, SPEC, seed=2)
    tf.train.Checkpoint(replay=restored).restore(path).assert_consumed()

    def go_on(replay):
        replay.add(make_items([20, 21]))
        replay.update_priorities(tf.constant([0, 4]), tf.constant([5.0, 0.1]))
        draws = [replay.sample(5, 0.6) for _ in range(3)]
        return [tensor.numpy() for draw in draws for tensor in tf.nest.flatten(draw)]

    expected = go_on(buffer)
    for got, want in zip(go_on(restored), expected):
        np.testing.assert_array_equal(got, want)
    # Without the restore, a buffer of the same seed and items draws other indices.
    fresh = buffer_class(7, SPEC, seed=2)
    fresh.add(make_items(range(7)))
    assert not np.array_equal(go_on(fresh)[0], expected[0])
