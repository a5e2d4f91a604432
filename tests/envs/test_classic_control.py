"""Compilation, resets, seeding, checkpoints and `make` of the in-graph classic-control envs."""

import math

import numpy as np
import pytest
import tensorflow as tf

from batchrl import envs

ENVS = [
    (envs.Pendulum, lambda rng, b: rng.uniform(-3, 3, (b, 1)).astype(np.float32)),
    (envs.CartPole, lambda rng, b: rng.integers(0, 2, b).astype(np.int32)),
    (envs.MountainCarContinuous, lambda rng, b: rng.uniform(-2, 2, (b, 1)).astype(np.float32)),
    (envs.Acrobot, lambda rng, b: rng.integers(0, 3, b).astype(np.int32)),
]


def run(env, actions):
    """Steps `env` through actions [T, B, ...]; returns observ, reward, terminated [T, B, ...]."""
    results = [env.step(actions[t]) for t in range(actions.shape[0])]
    return [tf.stack(column) for column in list(zip(*results, strict=True))[:3]]


@pytest.mark.parametrize("env_cls, sample_action", ENVS)
def test_xla_step_matches_eager(env_cls, sample_action):
    rng = np.random.default_rng(0)
    batch = 8
    actions = tf.constant(np.stack([sample_action(rng, batch) for _ in range(5)]))
    eager, compiled = env_cls(batch), env_cls(batch)
    eager.reset()
    compiled.reset()
    compiled.set_state(eager.state)

    expected = [tensor.numpy() for tensor in run(eager, actions)]
    compiled_run = tf.function(lambda actions: run(compiled, actions), jit_compile=True)
    actual = [tensor.numpy() for tensor in compiled_run(actions)]
    for want, got in zip(expected, actual, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(compiled.state.numpy(), eager.state.numpy(), rtol=1e-5, atol=1e-5)
    assert compiled.elapsed.numpy().tolist() == [5] * batch


@pytest.mark.parametrize("env_cls, sample_action", ENVS)
def test_xla_reset_is_reproducible(env_cls, sample_action):
    del sample_action
    first, second = env_cls(4, seed=3), env_cls(4, seed=3)
    reset_first = tf.function(first.reset, jit_compile=True)
    reset_second = tf.function(second.reset, jit_compile=True)
    np.testing.assert_array_equal(reset_first(), reset_second())
    np.testing.assert_array_equal(reset_first([1, 2]), reset_second([1, 2]))
    assert reset_first(tf.zeros([0], tf.int32)).shape[0] == 0
    np.testing.assert_array_equal(first.state.numpy(), second.state.numpy())
    assert first.episodes.numpy().tolist() == [1, 2, 2, 1]


@pytest.mark.parametrize("env_cls, sample_action", ENVS)
def test_reset_of_a_subset_changes_only_those_rows(env_cls, sample_action):
    rng = np.random.default_rng(1)
    env = env_cls(5)
    env.reset()
    for _ in range(3):
        env.step(sample_action(rng, 5))
    before = {
        name: getattr(env, name).numpy()
        for name in ("state", "observ", "reward", "elapsed", "episodes", "done")
    }
    observ = env.reset(tf.constant([1, 3]))
    assert observ.shape == (2,) + env.observation_space.shape
    np.testing.assert_array_equal(env.observ.numpy()[[1, 3]], observ.numpy())
    assert env.elapsed.numpy().tolist() == [3, 0, 3, 0, 3]
    assert env.episodes.numpy().tolist() == [1, 2, 1, 2, 1]
    for name, value in before.items():
        after = getattr(env, name).numpy()
        np.testing.assert_array_equal(after[[0, 2, 4]], value[[0, 2, 4]], err_msg=name)
    assert not np.array_equal(env.state.numpy()[[1, 3]], before["state"][[1, 3]])
    env.reset(tf.zeros([0], tf.int32))
    assert env.episodes.numpy().tolist() == [1, 2, 1, 2, 1]


@pytest.mark.parametrize("env_cls, sample_action", ENVS)
def test_initial_states_are_seeded_per_environment(env_cls, sample_action):
    del sample_action
    initial = env_cls(4, seed=7).reset().numpy()
    np.testing.assert_array_equal(env_cls(4, seed=7).reset().numpy(), initial)
    assert len({row.tobytes() for row in initial}) == 4
    assert not np.array_equal(env_cls(4, seed=8).reset().numpy(), initial)
    # Environment 2's first episode does not depend on the batch or on who resets with it.
    alone = env_cls(9, seed=7).reset([2]).numpy()
    np.testing.assert_array_equal(alone[0], initial[2])
    env = env_cls(4, seed=7)
    env.reset()
    assert not np.array_equal(env.reset([2]).numpy()[0], initial[2])


@pytest.mark.parametrize(
    "env_cls, low, high",
    [
        (envs.Pendulum, [-math.pi, -1.0], [math.pi, 1.0]),
        (envs.CartPole, [-0.05] * 4, [0.05] * 4),
        (envs.MountainCarContinuous, [-0.6, 0.0], [-0.4, 0.0]),
        (envs.Acrobot, [-0.1] * 4, [0.1] * 4),
    ],
)
def test_initial_state_distribution(env_cls, low, high):
    env = env_cls(1000)
    env.reset()
    state = env.state.numpy()
    low, high = np.array(low, np.float32), np.array(high, np.float32)
    assert (state >= low).all() and (state <= high).all()
    np.testing.assert_allclose(state.mean(0), (low + high) / 2, atol=0.05 * (high - low).max())
    np.testing.assert_allclose(state.std(0), (high - low) / math.sqrt(12), rtol=0.1, atol=1e-6)


def test_set_state_keeps_the_time_limit_count():
    env = envs.Pendulum(3, max_episode_steps=2)
    env.reset()
    env.step(tf.zeros([3, 1]))
    env.set_state([[1.0, 2.0]], indices=[1])
    np.testing.assert_allclose(env.state.numpy()[1], [1.0, 2.0])
    np.testing.assert_allclose(env.observ.numpy()[1], [math.cos(1.0), math.sin(1.0), 2.0])
    assert env.elapsed.numpy().tolist() == [1, 1, 1]
    assert env.step(tf.zeros([3, 1]))[3].numpy().tolist() == [True] * 3


def test_checkpoint_restores_the_batch(tmp_path):
    env = envs.CartPole(3, seed=1)
    env.reset()
    env.step([1, 0, 1])
    path = tf.train.Checkpoint(env=env).save(str(tmp_path / "ckpt"))
    saved = {name: getattr(env, name).numpy() for name in ("state", "elapsed", "episodes")}
    env.reset()
    env.step([0, 0, 0])
    restored = envs.CartPole(3, seed=1)
    tf.train.Checkpoint(env=restored).restore(path).assert_existing_objects_matched()
    for name, value in saved.items():
        np.testing.assert_array_equal(getattr(restored, name).numpy(), value, err_msg=name)
    # The restored episode counters continue the same initial-state streams.
    fresh = envs.CartPole(3, seed=1)
    fresh.reset()
    np.testing.assert_array_equal(restored.reset([0]).numpy(), fresh.reset([0]).numpy())


def test_make():
    env = envs.make("Acrobot-v1", batch_size=2, seed=5)
    assert isinstance(env, envs.Acrobot) and len(env) == 2 and env.seed == 5
    for name, cls in [
        ("Pendulum-v1", envs.Pendulum),
        ("CartPole-v1", envs.CartPole),
        ("MountainCarContinuous-v0", envs.MountainCarContinuous),
    ]:
        assert type(envs.make(name, 1, 0)) is cls
    with pytest.raises(ValueError, match="Pendulum-v1"):
        envs.make("Pendulum-v0", 1, 0)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_seed_is_a_variable_of_the_compiled_program(jit_compile):
    # One traced program serves every seed (what lets XLA's persistent cache serve a new
    # seed): setting `seed` after tracing gives the new seed's streams, without a retrace.
    env = envs.CartPole(3, seed=1)
    reset = tf.function(lambda: env.reset(), jit_compile=jit_compile)
    first = reset().numpy()
    env.seed = 2  # Restarts the streams: episode counters back to zero.
    second = reset().numpy()
    assert reset.experimental_get_tracing_count() == 1
    for seed, got in [(1, first), (2, second)]:
        fresh = envs.CartPole(3, seed=seed)  # XLA's random numbers differ from the kernels'.
        want = tf.function(lambda: fresh.reset(), jit_compile=jit_compile)().numpy()  # noqa: B023
        np.testing.assert_array_equal(got, want)
    assert not np.array_equal(first, second)
    with pytest.raises(ValueError, match=r"seed must be in \[0, 2\*\*31\), got -1"):
        env.seed = -1


@pytest.mark.parametrize("env_cls, sample_action", ENVS)
def test_members_draw_as_batches_of_their_seeds(env_cls, sample_action):
    """Block m of a batch split into members resets as a batch seeded seed + m."""
    del sample_action
    env = env_cls(6, seed=7)
    env.set_members(3)
    initial = env.reset().numpy()  # [6, O]
    for member in range(3):
        alone = env_cls(2, seed=7 + member).reset().numpy()
        np.testing.assert_array_equal(initial[2 * member : 2 * member + 2], alone)
    env.seed = 9  # Moves every block: block m now draws from 9 + m.
    np.testing.assert_array_equal(env.reset().numpy()[4:], env_cls(2, seed=11).reset().numpy())
    with pytest.raises(ValueError, match="4 members cannot split a batch of 6"):
        env_cls(6, seed=7).set_members(4)


@pytest.mark.parametrize("env_cls, sample_action", ENVS)
def test_members_with_listed_seeds_draw_as_batches_of_them(env_cls, sample_action):
    """With offsets, block m resets as a batch seeded seed + offsets[m] (train.seeds)."""
    del sample_action
    env = env_cls(6, seed=7)
    env.set_members(3, offsets=[5, -7, 5])  # Seeds 12, 0, 12.
    initial = env.reset().numpy()  # [6, O]
    for member, seed in enumerate([12, 0, 12]):
        alone = env_cls(2, seed=seed).reset().numpy()
        np.testing.assert_array_equal(initial[2 * member : 2 * member + 2], alone)
    env.seed = 9  # Moves every block: block m now draws from 9 + offsets[m].
    np.testing.assert_array_equal(env.reset().numpy()[2:4], env_cls(2, seed=2).reset().numpy())
    with pytest.raises(ValueError, match="2 seed offsets for 3 members"):
        env_cls(6, seed=7).set_members(3, offsets=[0, 1])
