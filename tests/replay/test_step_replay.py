"""StepReplay: the transitions NStep makes, each observation stored once."""

import numpy as np
import pytest
import tensorflow as tf

from batchrl.replay import NStep, StepReplay

B, N, DISCOUNT = 3, 3, 0.9
OBSERV = tf.TensorSpec([2], tf.float32)
ACTION = tf.TensorSpec([], tf.int32)


def episodes(pushes, seed=0, end_rate=0.15):
    """Steps of B agents as `simulate` gives them: the next push's observation is the
    last push's next one, unless the episode ended (then a reset observation)."""
    rng = np.random.default_rng(seed)
    observ = rng.normal(size=[B, 2]).astype(np.float32)
    for _ in range(pushes):
        ends = rng.random([B]) < end_rate
        terminated = ends & (rng.random([B]) < 0.5)
        truncated = ends & ~terminated
        step = {
            "observ": observ,
            "action": rng.integers(0, 5, [B]).astype(np.int32),
            "reward": rng.normal(size=[B]).astype(np.float32),
            "terminated": terminated,
            "truncated": truncated,
            "next_observ": rng.normal(size=[B, 2]).astype(np.float32),
        }
        yield step
        reset = rng.normal(size=[B, 2]).astype(np.float32)
        observ = np.where(ends[:, None], reset, step["next_observ"])


def push(buffer, step):
    keys = ("observ", "action", "reward", "terminated", "truncated", "next_observ")
    return buffer.push(*(step[key] for key in keys))


def assert_transitions_equal(actual, expected):
    for key in expected:
        np.testing.assert_array_equal(np.asarray(actual[key]), np.asarray(expected[key]), key)


def test_it_holds_the_transitions_nstep_makes_and_loses_them_only_when_overwritten():
    capacity = B * 12  # Columns of 12 slots: wraps around several times in 60 pushes.
    replay = StepReplay(capacity, OBSERV, ACTION, B, N, DISCOUNT)
    reference = NStep(N, DISCOUNT, B, {"observ": OBSERV, "action": ACTION})
    expected = {}  # slot -> the transition last completed there
    for count, step in enumerate(episodes(60)):
        slots = push(replay, step).numpy()
        valid, transition = push(reference, step)
        assert valid.numpy().all() == (count >= N - 1)
        if count < N - 1:
            assert (slots == replay.capacity).all()
            continue
        assert_transitions_equal(replay.read(slots), transition)
        for agent, slot in enumerate(slots):
            expected[slot] = {key: value[agent] for key, value in transition.items()}
        holds = np.flatnonzero(replay.holds.numpy())
        assert replay.size().numpy() == len(holds)
        for slot in holds:  # Every transition held is the one completed there last.
            assert_transitions_equal(
                replay.read([slot]), {k: [v] for k, v in expected[slot].items()}
            )
    # Full columns hold C - 1 - n transitions, less one per episode end in them.
    assert 0 < replay.size().numpy() <= B * (12 - 1 - N)


def test_each_observation_is_stored_once():
    capacity = 1000
    replay = StepReplay(capacity, OBSERV, ACTION, B, 1, DISCOUNT)
    observ_slots = replay.observ[0].shape[0]
    assert observ_slots == B * (capacity // B) + 1  # One per slot, and the spare one.
    variables = {v.name for v in replay.variables if v.shape[:1] == [observ_slots]}
    observ_bytes = sum(
        v.shape.num_elements() * v.dtype.size
        for v in replay.variables
        if len(v.shape) == 2 and v.shape[1] == 2
    )
    assert observ_bytes == observ_slots * 2 * 4, variables


def test_observations_keep_their_dtype():
    frames = tf.TensorSpec([4, 4], tf.uint8)
    replay = StepReplay(B * 8, frames, ACTION, B, 1, DISCOUNT)
    observ = np.full([B, 4, 4], 200, np.uint8)
    replay.push(observ, np.zeros(B, np.int32), np.zeros(B), [False] * B, [False] * B, observ)
    _, _, batch = replay.sample(4)
    assert batch["observ"].dtype == tf.uint8 and batch["next_observ"].dtype == tf.uint8
    np.testing.assert_array_equal(batch["observ"].numpy(), 200)


def test_uniform_sampling_draws_only_transitions_held_and_each_equally_often():
    replay = StepReplay(B * 20, OBSERV, ACTION, B, N, DISCOUNT, seed=3)
    for step in episodes(50, seed=1, end_rate=0.3):
        push(replay, step)
    holds = replay.holds.numpy()
    held = np.flatnonzero(holds)
    assert 0 < len(held) < replay.capacity  # Some slots lack a transition.
    sample = tf.function(lambda: replay.sample(256)[0])
    draws = np.concatenate([sample().numpy() for _ in range(400)])  # 102,400 draws
    assert holds[draws].all()
    counts = np.bincount(draws, minlength=replay.capacity + 1)[held]
    expected = len(draws) / len(held)
    # Chi-square with len(held) - 1 degrees of freedom: its mean plus 5 standard deviations.
    chi2 = ((counts - expected) ** 2 / expected).sum()
    dof = len(held) - 1
    assert chi2 < dof + 5 * np.sqrt(2 * dof), chi2


@pytest.mark.slow  # Out of the default suite: 14 s on 2 busy cores (2026-12-06).
def test_prioritized_sampling_follows_priorities_and_never_draws_empty_slots():
    alpha = 0.7
    replay = StepReplay(B * 20, OBSERV, ACTION, B, N, DISCOUNT, prioritized=True, alpha=alpha)
    for step in episodes(50, seed=2, end_rate=0.3):
        push(replay, step)
    held = np.flatnonzero(replay.holds.numpy())
    # Setting priorities on slots without a transition leaves them at 0.
    priorities = np.random.default_rng(0).uniform(0.1, 3.0, replay.capacity + 1)
    replay.update_priorities(np.arange(replay.capacity + 1), priorities.astype(np.float32))
    p = (priorities[held] + 1e-6) ** alpha
    draws = np.concatenate([replay.sample(256, 0.5)[0].numpy() for _ in range(400)])
    assert np.isin(draws, held).all()
    frequency = np.bincount(draws, minlength=replay.capacity + 1)[held] / len(draws)
    np.testing.assert_allclose(frequency, p / p.sum(), atol=0.006)  # ~5 sigma at 102,400 draws
    indices, weights, _ = replay.sample(64, 0.5)
    w = (len(held) * p[np.searchsorted(held, indices.numpy())] / p.sum()) ** -0.5
    np.testing.assert_allclose(weights.numpy(), w / w.max(), rtol=1e-5)


@pytest.mark.parametrize("prioritized", [False, True])
@pytest.mark.slow  # Out of the default suite: 15 s on 2 busy cores (2026-12-06).
def test_graph_and_xla_push_and_sample_the_same(prioritized):
    def run(jit):
        replay = StepReplay(B * 16, OBSERV, ACTION, B, N, DISCOUNT, prioritized, seed=5)

        @tf.function(jit_compile=jit)
        def step_and_sample(step):
            push(replay, step)
            indices, weights, batch = replay.sample(8, 0.4)
            replay.update_priorities(indices, batch["reward"])
            return indices, weights, batch["next_observ"]

        return [step_and_sample(step) for step in episodes(30, seed=4)]

    for graph, xla in zip(run(False), run(True)):
        np.testing.assert_array_equal(graph[0], xla[0])  # The same transitions,
        np.testing.assert_array_equal(graph[2], xla[2])
        np.testing.assert_allclose(graph[1], xla[1], rtol=1e-6)  # XLA's pow: 1 ulp apart.


def test_a_restored_buffer_samples_what_the_saved_one_would_have(tmp_path):
    steps = list(episodes(40, seed=6))

    def make():
        return StepReplay(B * 16, OBSERV, ACTION, B, N, DISCOUNT, prioritized=True, seed=7)

    saved = make()
    for step in steps[:25]:
        push(saved, step)
    saved.sample(8, 0.4)
    path = tf.train.Checkpoint(replay=saved).write(str(tmp_path / "replay"))
    restored = make()
    tf.train.Checkpoint(replay=restored).read(path).assert_consumed()
    for buffer in (saved, restored):
        for step in steps[25:]:
            push(buffer, step)
    for _ in range(3):
        a, b = saved.sample(8, 0.4), restored.sample(8, 0.4)
        tf.nest.map_structure(np.testing.assert_array_equal, a, b)


def test_sampling_an_empty_buffer_is_an_error_and_small_capacities_are_refused():
    replay = StepReplay(B * 8, OBSERV, ACTION, B, N, DISCOUNT)
    with pytest.raises(ValueError, match="empty"):
        replay.sample(4)
    with pytest.raises(ValueError, match=r"capacity=20 must be at least .* = 24"):
        StepReplay(20, OBSERV, ACTION, B, N, DISCOUNT)


@pytest.mark.parametrize("mode", ["eager", "function", "xla"])
@pytest.mark.slow  # Out of the default suite: 13 s on 2 busy cores (2026-12-06).
def test_truncate_after_a_step_is_that_step_truncated(mode):
    # Agents 0 and 2 restart after step 9 without an episode end (a resume on Gymnasium's
    # environments); agent 1's step 9 terminated its episode anyway. Truncating all three
    # after the push leaves the buffer exactly as pushing step 9 with agents 0 and 2
    # truncated does: their windows stop there and their cursors skip the slot of the
    # final observation, which the new episodes' first observations then do not overwrite.
    steps = list(episodes(24, seed=3, end_rate=0.2))
    restart = 9
    steps[restart]["terminated"] = np.array([False, True, False])
    steps[restart]["truncated"] = np.array([False, False, False])
    steps[restart + 1]["observ"] = np.full([B, 2], 7.0, np.float32)  # new episodes
    flagged = [dict(step) for step in steps]
    flagged[restart]["truncated"] = np.array([True, False, True])

    def make():
        return StepReplay(B * 10, OBSERV, ACTION, B, N, DISCOUNT, prioritized=True)

    replay, reference = make(), make()
    compile_fn = (lambda fn: fn) if mode == "eager" else tf.function
    if mode == "xla":
        compile_fn = lambda fn: tf.function(fn, jit_compile=True)  # noqa: E731
    keys = ("observ", "action", "reward", "terminated", "truncated", "next_observ")
    push_fn, truncate = compile_fn(replay.push), compile_fn(replay.truncate)
    untouched = [v.numpy() for v in replay.variables]
    truncate(tf.constant([0, 1, 2]))  # Nothing pushed yet: nothing to end.
    for before, after in zip(untouched, replay.variables):
        np.testing.assert_array_equal(before, after.numpy())
    for count, (step, reference_step) in enumerate(zip(steps, flagged)):
        push_fn(*(tf.constant(step[key]) for key in keys))
        push(reference, reference_step)
        if count == restart:
            truncate(tf.constant([0, 1, 2]))
    for variable, expected in zip(replay.variables, reference.variables):
        np.testing.assert_array_equal(variable.numpy(), expected.numpy(), variable.name)
    # The transitions of agents 0 and 2 that end at step 9 bootstrap from its next
    # observation, never from the new episodes' first one.
    held = tf.where(replay.holds)[:, 0]
    assert not np.any(replay.read(held)["next_observ"].numpy() == 7.0)
