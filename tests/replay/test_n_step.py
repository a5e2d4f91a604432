"""n-step returns over a block and the NStep accumulator, against a numpy loop of the formula."""

import numpy as np
import pytest
import tensorflow as tf

from batchrl.replay import NStep, UniformReplay, n_step_returns

MODES = ["eager", "function", "xla"]
GAMMA = 0.9
SPEC = {"observ": tf.TensorSpec([2], tf.uint8), "action": tf.TensorSpec([], tf.int32)}


def compile_fn(fn, mode):
    if mode == "eager":
        return fn
    return tf.function(fn, jit_compile=mode == "xla")


def reference(rewards, terminated, truncated, gamma, n):
    """R_t = sum_{k<m} gamma^k r_{t+k}, discount 0 or gamma^m, and m, one (t, b) at a time."""
    length, batch = rewards.shape
    returns, discounts = np.zeros([length, batch]), np.zeros([length, batch])
    offsets = np.zeros([length, batch], np.int32)
    for t in range(length):
        for b in range(batch):
            total, m, terminal = 0.0, 0, False
            for k in range(n):
                if t + k == length:  # cut at the end of the block, as if truncated
                    break
                total += gamma**k * rewards[t + k, b]
                m += 1
                if terminated[t + k, b]:
                    terminal = True
                    break
                if truncated[t + k, b]:
                    break
            returns[t, b], offsets[t, b] = total, m
            discounts[t, b] = 0.0 if terminal else gamma**m
    return returns, discounts, offsets


def episodes(length, batch, seed):
    """Steps of `batch` agents whose observations are (episode, step in the episode)."""
    rng = np.random.default_rng(seed)
    terminated = rng.random([length, batch]) < 0.15
    truncated = rng.random([length, batch]) < 0.15
    terminated[5, 0] = truncated[5, 0] = True  # both: terminated wins
    observ = np.zeros([length, batch, 2], np.uint8)
    episode, step = np.zeros(batch, np.uint8), np.zeros(batch, np.uint8)
    for t in range(length):
        observ[t, :, 0], observ[t, :, 1] = episode, step
        done = terminated[t] | truncated[t]
        episode, step = episode + done, np.where(done, 0, step + 1).astype(np.uint8)
    next_observ = observ.copy()
    next_observ[..., 1] += 1  # the step's own episode, also at its end
    return {
        "observ": observ,
        "action": (10 * np.arange(length)[:, None] + np.arange(batch)).astype(np.int32),
        "reward": rng.normal(size=[length, batch]).astype(np.float32),
        "terminated": terminated,
        "truncated": truncated,
        "next_observ": next_observ,
    }


@pytest.mark.parametrize("mode", MODES)
def test_n_step_returns_golden_numbers(mode):
    # One agent, gamma 0.5, n = 3; step 2 terminated, step 3 truncated:
    #   t=0: 1 + 0.5*2 + 0.25*3 = 2.75, ends terminated: discount 0, m 3
    #   t=1: 2 + 0.5*3 = 3.5, 0, 2;   t=2: 3, 0, 1;   t=3: 4, truncated: 0.5, 1
    #   t=4: 5 + 0.5*6 = 8, cut at T: 0.25, 2;   t=5: 6, 0.5, 1
    rewards = tf.constant([[1.0], [2.0], [3.0], [4.0], [5.0], [6.0]])
    terminated = tf.constant([[False], [False], [True], [False], [False], [False]])
    truncated = tf.constant([[False], [False], [False], [True], [False], [False]])
    fn = compile_fn(lambda *args: n_step_returns(*args, 0.5, 3), mode)
    returns, discounts, offsets = fn(rewards, terminated, truncated)
    np.testing.assert_allclose(returns.numpy()[:, 0], [2.75, 3.5, 3.0, 4.0, 8.0, 6.0])
    np.testing.assert_allclose(discounts.numpy()[:, 0], [0.0, 0.0, 0.0, 0.5, 0.25, 0.5])
    np.testing.assert_array_equal(offsets.numpy()[:, 0], [3, 2, 1, 1, 2, 1])
    assert offsets.dtype == tf.int32


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [1, 3, 5])
def test_n_step_returns_match_the_loop(mode, n):
    data = episodes(40, 3, seed=n)
    fn = compile_fn(lambda *args: n_step_returns(*args, GAMMA, n), mode)
    got = fn(data["reward"], data["terminated"], data["truncated"])
    want = reference(data["reward"], data["terminated"], data["truncated"], GAMMA, n)
    np.testing.assert_allclose(got[0].numpy(), want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1].numpy(), want[1], rtol=1e-6)
    np.testing.assert_array_equal(got[2].numpy(), want[2])
    assert 1 < want[2].mean() < n or n == 1  # windows both full and cut


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [1, 3])
def test_n_step_emits_each_step_once_with_its_window(mode, n):
    length, batch = 40, 3
    data = episodes(length, batch, seed=10 + n)
    keys = ["observ", "action", "reward", "terminated", "truncated", "next_observ"]
    returns, discounts, offsets = reference(
        data["reward"], data["terminated"], data["truncated"], GAMMA, n
    )
    block = n_step_returns(data["reward"], data["terminated"], data["truncated"], GAMMA, n)
    accumulator = NStep(n, GAMMA, batch, SPEC)
    push = compile_fn(accumulator.push, mode)
    agents = np.arange(batch)
    for pushed in range(length):
        valid, transition = push(*[tf.constant(data[key][pushed]) for key in keys])
        np.testing.assert_array_equal(valid.numpy(), np.full(batch, pushed >= n - 1))
        if pushed < n - 1:
            continue
        t = pushed - (n - 1)  # the step emitted
        got = {key: value.numpy() for key, value in transition.items()}
        np.testing.assert_array_equal(got["observ"], data["observ"][t])
        np.testing.assert_array_equal(got["action"], data["action"][t])
        np.testing.assert_allclose(got["reward"], returns[t], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got["reward"], block[0][t].numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got["discount"], discounts[t], rtol=1e-6)
        np.testing.assert_allclose(got["discount"], block[1][t].numpy(), rtol=1e-6)
        bootstrap = data["next_observ"][t + offsets[t] - 1, agents]  # [B, 2]
        np.testing.assert_array_equal(got["next_observ"], bootstrap)
        # The episode ids: the window never leaves the episode of its first step.
        np.testing.assert_array_equal(got["next_observ"][:, 0], got["observ"][:, 0])
        np.testing.assert_array_equal(got["next_observ"][:, 1] - got["observ"][:, 1], offsets[t])
        if n == 1:
            np.testing.assert_array_equal(got["reward"], data["reward"][t])
            expected = GAMMA * (1 - data["terminated"][t].astype(np.float32))
            np.testing.assert_allclose(got["discount"], expected, rtol=1e-6)
    assert len(np.unique(data["observ"][:, :, 0])) > 5  # many episodes in the run


@pytest.mark.parametrize("mode", MODES)
def test_push_block_emits_what_pushes_one_at_a_time_do(mode):
    """Blocks of 4 steps (the first shorter than the window) against single pushes."""
    n, length, batch = 3, 17, 3
    data = episodes(length, batch, seed=3)
    keys = ["observ", "action", "reward", "terminated", "truncated", "next_observ"]
    single, blocks = NStep(n, GAMMA, batch, SPEC), NStep(n, GAMMA, batch, SPEC)
    want = []
    for t in range(length):
        valid, transition = single.push(*[tf.constant(data[key][t]) for key in keys])
        if valid.numpy().all():
            want.append({key: value.numpy() for key, value in transition.items()})
    want = {key: np.concatenate([part[key] for part in want]) for key in want[0]}
    push_block = compile_fn(blocks.push_block, mode)
    got = [push_block(*[tf.constant(data[key][:1]) for key in keys])]  # n - 1 > 1: none.
    assert all(value.shape[0] == 0 for value in got[0].values())
    for start in range(1, length, 4):
        got.append(push_block(*[tf.constant(data[key][start : start + 4]) for key in keys]))
    got = {key: np.concatenate([part[key].numpy() for part in got]) for key in want}
    assert len(want["reward"]) == (length - (n - 1)) * batch
    for key in ("observ", "action", "next_observ"):
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    for key in ("reward", "discount"):  # A graph may fuse the sums differently.
        np.testing.assert_allclose(got[key], want[key], rtol=1e-6, atol=1e-7, err_msg=key)


def test_a_restored_accumulator_emits_what_the_saved_one_would(tmp_path):
    # Nested observations, and the replay's transition spec (extra keys are ignored).
    spec = {
        "observ": {"frame": tf.TensorSpec([2], tf.uint8), "speed": tf.TensorSpec([])},
        "action": tf.TensorSpec([], tf.int32),
        "reward": tf.TensorSpec([]),
        "discount": tf.TensorSpec([]),
    }
    data = episodes(12, 2, seed=0)

    def step(accumulator, t):
        observ = {"frame": data["observ"][t], "speed": data["reward"][t] * 2}
        next_observ = {"frame": data["next_observ"][t], "speed": data["reward"][t] * 3}
        args = (data["action"][t], data["reward"][t], data["terminated"][t])
        valid, transition = accumulator.push(observ, *args, data["truncated"][t], next_observ)
        return [valid.numpy()] + [x.numpy() for x in tf.nest.flatten(transition)]

    saved = NStep(4, GAMMA, 2, spec)
    for t in range(5):
        step(saved, t)
    path = tf.train.Checkpoint(n_step=saved).save(str(tmp_path / "n_step"))
    restored = NStep(4, GAMMA, 2, spec)
    tf.train.Checkpoint(n_step=restored).restore(path).assert_consumed()
    for t in range(5, 12):
        for got, want in zip(step(restored, t), step(saved, t)):
            np.testing.assert_array_equal(got, want)
        assert got[0].all()  # valid right after the restore


def test_transitions_go_into_a_replay_under_xla():
    data = episodes(10, 4, seed=3)
    accumulator = NStep(3, GAMMA, 4, SPEC)
    replay = UniformReplay(
        64,
        {
            **SPEC,
            "reward": tf.TensorSpec([]),
            "discount": tf.TensorSpec([]),
            "next_observ": SPEC["observ"],
        },
    )

    @tf.function(jit_compile=True)
    def step(*args):
        valid, transition = accumulator.push(*args)
        tf.cond(valid[0], lambda: replay.add(transition), lambda: tf.zeros([4], tf.int32))

    keys = ["observ", "action", "reward", "terminated", "truncated", "next_observ"]
    for t in range(10):
        step(*[tf.constant(data[key][t]) for key in keys])
    assert replay.size().numpy() == 4 * (10 - 2)
    held = replay.ring.read(tf.range(32))
    np.testing.assert_array_equal(held["action"].numpy(), data["action"][:8].reshape(-1))


@pytest.mark.parametrize("mode", MODES)
def test_truncate_after_a_push_is_that_step_truncated(mode):
    # Agents 0 and 2 restart after step 6 without an episode end; agent 1's step 6 ended
    # its episode anyway. Every transition emitted is the one of pushing step 6 with
    # agents 0 and 2 truncated, and `truncate` says whom it cut.
    length, batch, n, restart = 16, 3, 3, 6
    data = episodes(length, batch, seed=5)
    data["terminated"][restart] = [False, True, False]
    data["truncated"][restart] = False
    flagged = {key: value.copy() for key, value in data.items()}
    flagged["truncated"][restart] = [True, False, True]
    keys = ["observ", "action", "reward", "terminated", "truncated", "next_observ"]
    accumulator, reference = NStep(n, GAMMA, batch, SPEC), NStep(n, GAMMA, batch, SPEC)
    push, truncate = compile_fn(accumulator.push, mode), compile_fn(accumulator.truncate, mode)
    np.testing.assert_array_equal(truncate(tf.constant([0, 2])).numpy(), [False, False])
    for t in range(length):
        got = push(*[tf.constant(data[key][t]) for key in keys])
        want = reference.push(*[tf.constant(flagged[key][t]) for key in keys])
        tf.nest.map_structure(np.testing.assert_array_equal, got, want)
        if t == restart:
            cut = truncate(tf.constant([0, 1, 2])).numpy()
            np.testing.assert_array_equal(cut, [True, False, True])
            np.testing.assert_array_equal(truncate(tf.constant([0])).numpy(), [False])
    for variable, expected in zip(accumulator.variables, reference.variables):
        np.testing.assert_array_equal(variable.numpy(), expected.numpy(), variable.name)
