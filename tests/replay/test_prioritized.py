"""Prioritized replay: sampling frequencies, importance weights, and how priorities are set."""

import numpy as np
import pytest
import tensorflow as tf

from batchrl.replay import PrioritizedReplay

SPEC = {"action": tf.TensorSpec([], tf.int32)}


def items(numbers):
    return {"action": np.asarray(numbers, np.int32)}


def probabilities(raw, alpha, epsilon):
    priority = (np.abs(np.asarray(raw, np.float64)) + epsilon) ** alpha
    return priority / priority.sum()


def frequencies(buffer, batch_size, draws, held):
    """How often each index comes in `draws` sampled indices, in batches of `batch_size`."""

    @tf.function
    def count():
        counts = tf.zeros([held], tf.int32)
        for _ in tf.range(draws // batch_size):
            indices = buffer.sample(batch_size, 0.4)[0]
            counts += tf.math.bincount(indices, minlength=held, maxlength=held)
        return counts

    return count().numpy() / draws


def assert_frequencies(frequency, probability, draws):
    # Independent draws make each count binomial: a correct sampler is off by more than 5
    # standard errors with probability 6e-7 per index. Stratified draws (one per segment
    # of the total) vary less than independent ones, so the bound holds for them too.
    # Ignoring alpha (alpha = 1) moves a probability below by 0.039: 50 standard errors at
    # 200,000 draws, 16 at 20,000.
    error = np.sqrt(probability * (1 - probability) / draws)
    np.testing.assert_array_less(np.abs(frequency - probability), 5 * error)


@pytest.mark.parametrize("batch_size, draws", [(16, 200_000), (1, 20_000)])
def test_sampling_frequencies_are_the_priorities_to_the_alpha(batch_size, draws):
    raw = np.arange(1.0, 9.0)  # 8 items
    buffer = PrioritizedReplay(8, SPEC, alpha=0.6, seed=batch_size)
    buffer.add(items(range(8)), priorities=tf.constant(raw, tf.float32))
    probability = probabilities(raw, 0.6, 1e-6)
    assert_frequencies(frequencies(buffer, batch_size, draws, 8), probability, draws)
    # New priorities, some repeated within one update: the last one of an index counts.
    buffer.update_priorities(tf.constant([0, 7, 0, 3]), tf.constant([4.0, 0.5, 20.0, -6.0]))
    raw[[0, 7, 3]] = [20.0, 0.5, -6.0]
    probability = probabilities(raw, 0.6, 1e-6)
    assert probability[0] > 0.2
    assert_frequencies(frequencies(buffer, batch_size, draws, 8), probability, draws)


def test_a_batch_takes_one_point_in_each_segment_of_the_total():
    # Equal priorities and as many segments as items: each item once, in the tree's order.
    buffer = PrioritizedReplay(16, SPEC, seed=0)
    buffer.add(items(range(8)))
    for _ in range(3):
        np.testing.assert_array_equal(buffer.sample(8, 0.5)[0].numpy(), np.arange(8))


@pytest.mark.parametrize("beta", [0.0, 0.4, 1.0])
@pytest.mark.parametrize("mode", ["eager", "xla"])
def test_importance_weights_are_exact(beta, mode):
    # 6 items held of 16: N is the size, not the capacity.
    raw = np.array([0.5, 3.0, 0.0, 1.5, 7.0, 0.2])
    buffer = PrioritizedReplay(16, SPEC, alpha=0.7, epsilon=0.01, seed=3)
    buffer.add(items(range(6)), priorities=tf.constant(raw, tf.float32))
    sample = buffer.sample if mode == "eager" else tf.function(buffer.sample, jit_compile=True)
    indices, weights, batch = sample(32, beta)
    indices = indices.numpy()
    np.testing.assert_array_equal(batch["action"].numpy(), indices)
    probability = probabilities(raw, 0.7, 0.01)[indices]
    expected = (6 * probability) ** -beta
    np.testing.assert_allclose(weights.numpy(), expected / expected.max(), rtol=1e-5)
    assert len(set(indices)) >= 4 and weights.numpy().max() == 1.0


def test_new_items_enter_at_the_largest_priority_so_far():
    buffer = PrioritizedReplay(8, SPEC, alpha=0.5, epsilon=0.25)
    buffer.add(items([0, 1]))  # the maximum starts at 1: priorities 1^alpha
    np.testing.assert_allclose(buffer.tree.get([0, 1]).numpy(), [1.0, 1.0])
    buffer.add(items([2, 3]), priorities=tf.constant([0.0, -3.75]))  # epsilon, |raw|
    np.testing.assert_allclose(buffer.tree.get([2, 3]).numpy(), [0.5, 2.0])
    assert buffer.max_priority().numpy() == 4.0  # |-3.75| + 0.25, before alpha
    buffer.add(items([4]))
    np.testing.assert_allclose(buffer.tree.get([4]).numpy(), [2.0])
    buffer.update_priorities(tf.constant([0, 0]), tf.constant([8.75, 1.0]))
    np.testing.assert_allclose(buffer.tree.get([0]).numpy(), [np.sqrt(1.25)])  # last wins
    assert buffer.max_priority().numpy() == 9.0  # the maximum over all given
    buffer.update_priorities(tf.constant([1]), tf.constant([0.75]))  # the maximum stays
    buffer.add(items([5]))
    np.testing.assert_allclose(buffer.tree.get([1, 5]).numpy(), [1.0, 3.0])
    np.testing.assert_allclose(buffer.tree.total().numpy(), 1.25**0.5 + 1 + 0.5 + 2 + 2 + 3)
    assert buffer.size().numpy() == 6


def test_overwritten_items_take_their_new_priority():
    buffer = PrioritizedReplay(3, SPEC, alpha=1.0, epsilon=0.5)
    buffer.add(items([0, 1, 2]), priorities=tf.constant([9.5, 1.5, 2.5]))
    buffer.add(items([3, 4]), priorities=tf.constant([0.5, 0.5]))  # over slots 0 and 1
    np.testing.assert_allclose(buffer.tree.get([0, 1, 2]).numpy(), [1.0, 1.0, 3.0])
    assert buffer.tree.total().numpy() == 5.0 and buffer.max_priority().numpy() == 10.0


INDICES = {
    "int32": lambda: tf.constant([2, 0], tf.int32),
    "int64": lambda: tf.constant([2, 0], tf.int64),
    "tf.constant of numpy's int": lambda: tf.constant(np.array([2, 0])),
    "numpy int64": lambda: np.array([2, 0]),
    "numpy uint8": lambda: np.array([2, 0], np.uint8),
    "list": lambda: [2, 0],
}


@pytest.mark.parametrize("mode", ["eager", "function", "xla"])
@pytest.mark.parametrize("indices", INDICES.values(), ids=INDICES.keys())
def test_update_priorities_takes_indices_of_any_integer_dtype(indices, mode):
    buffer = PrioritizedReplay(4, SPEC, alpha=1.0, epsilon=0.5)
    buffer.add(items(range(4)))  # priorities 1, the starting maximum
    update = buffer.update_priorities
    if mode != "eager":
        update = tf.function(update, jit_compile=mode == "xla")
    update(indices(), tf.constant([2.5, 4.5]))
    np.testing.assert_allclose(buffer.tree.get(tf.range(4)).numpy(), [5.0, 1.0, 3.0, 1.0])
    assert buffer.max_priority().numpy() == 5.0


@pytest.mark.parametrize("mode", ["eager", "function"])
@pytest.mark.parametrize(
    "indices, dtype",
    [(tf.constant([2.0, 0.0]), "float32"), (np.array([2.0, 0.0]), "float64"), ([True], "bool")],
)
def test_update_priorities_refuses_indices_that_are_not_integers(indices, dtype, mode):
    buffer = PrioritizedReplay(4, SPEC)
    buffer.add(items(range(4)))
    update = buffer.update_priorities if mode == "eager" else tf.function(buffer.update_priorities)
    with pytest.raises(TypeError, match=f"indices must be of an integer dtype, got {dtype}"):
        update(indices, tf.constant([2.5, 4.5][: len(indices)]))
    np.testing.assert_allclose(buffer.tree.get(tf.range(4)).numpy(), [1.0, 1.0, 1.0, 1.0])


@pytest.mark.parametrize("mode", ["eager", "function", "xla"])
def test_updates_of_slots_written_since_their_sample_are_dropped(mode):
    # 4 slots, alpha 1, epsilon 0.5. A batch samples every slot (each written once); then
    # two adds overwrite slots 0 and 1 with new items of their own priorities, and the
    # batch's update arrives: slots 0 and 1 keep the new items' priorities, and their
    # stale deltas (9.5) do not raise the maximum; slots 2 and 3 take theirs.
    buffer = PrioritizedReplay(4, SPEC, alpha=1.0, epsilon=0.5, count_writes=True)
    compiled = (lambda fn: fn) if mode == "eager" else tf.function
    if mode == "xla":
        compiled = lambda fn: tf.function(fn, jit_compile=True)  # noqa: E731
    add, sample = compiled(buffer.add), compiled(buffer.sample)
    writes, update = compiled(buffer.writes), compiled(buffer.update_priorities)
    add(items(range(4)))
    indices, _, _ = sample(4, 0.4)
    np.testing.assert_array_equal(indices.numpy(), [0, 1, 2, 3])
    sampled = writes(indices)
    np.testing.assert_array_equal(sampled.numpy(), [1, 1, 1, 1])
    assert sampled.dtype == tf.int64
    add(items([4, 5]), tf.constant([1.5, 2.5]))  # over slots 0 and 1
    np.testing.assert_array_equal(writes(tf.range(4)).numpy(), [2, 2, 1, 1])
    update(indices, tf.constant([9.5, 9.5, 3.5, 4.5]), sampled.numpy())  # NumPy int64
    np.testing.assert_allclose(buffer.tree.get(tf.range(4)).numpy(), [2.0, 3.0, 4.0, 5.0])
    assert buffer.max_priority().numpy() == 5.0
    # A batch sampled after the adds updates all its slots.
    update(indices, tf.constant([0.5, 1.5, 0.5, 0.5]), writes(indices))
    np.testing.assert_allclose(buffer.tree.get(tf.range(4)).numpy(), [1.0, 2.0, 1.0, 1.0])


def test_write_counts_survive_a_checkpoint_and_need_count_writes(tmp_path):
    saved = PrioritizedReplay(4, SPEC, count_writes=True)
    saved.add(items(range(4)))
    saved.add(items([4, 5]))  # slots 0 and 1 again
    path = tf.train.Checkpoint(replay=saved).write(str(tmp_path / "replay"))
    restored = PrioritizedReplay(4, SPEC, count_writes=True)
    tf.train.Checkpoint(replay=restored).read(path).assert_consumed()
    np.testing.assert_array_equal(restored.writes([0, 1, 2, 3]).numpy(), [2, 2, 1, 1])
    # Without count_writes the buffer holds the variables it always had, so checkpoints
    # written before write counts existed restore into it.
    plain = PrioritizedReplay(4, SPEC)
    assert len(plain.variables) == len(saved.variables) - 1
    with pytest.raises(ValueError, match="does not count writes"):
        plain.writes([0])
    with pytest.raises(ValueError, match="does not count writes"):
        plain.update_priorities([0], [1.0], writes=[1])


def test_epsilon_must_be_positive():
    with pytest.raises(ValueError, match="epsilon"):
        PrioritizedReplay(4, SPEC, epsilon=0.0)
