"""Golden tests of the ES math against numpy written from the formulas, eager and in graph."""

import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from batchrl.algorithms.es import fitness, gradient, noise

MODES = ["eager", "function"]


def run(fn, *args, mode):
    if mode == "function":
        return tf.function(fn)(*args).numpy()
    return fn(*args).numpy()


def numpy_centered_ranks(x):
    x = np.asarray(x, np.float64)
    n = len(x)
    rank = np.array([(x < v).sum() + ((x == v).sum() - 1) / 2 for v in x])
    return rank / (n - 1) - 0.5


@pytest.mark.parametrize("mode", MODES)
def test_centered_ranks_with_ties(mode):
    x = np.array([3.0, 1.0, 1.0, 5.0, -2.0], np.float32)
    # Sorted: -2 (rank 0), 1 and 1 (ranks 1 and 2, both 1.5), 3 (rank 3), 5 (rank 4).
    expected = np.array([3, 1.5, 1.5, 4, 0]) / 4 - 0.5
    np.testing.assert_allclose(numpy_centered_ranks(x), expected)
    np.testing.assert_allclose(run(fitness.centered_ranks, x, mode=mode), expected, atol=1e-6)
    assert run(fitness.centered_ranks, np.ones(4, np.float32), mode=mode).tolist() == [0] * 4
    assert run(fitness.centered_ranks, np.ones(1, np.float32), mode=mode).tolist() == [0]


@pytest.mark.parametrize("mode", MODES)
def test_separate_ranks_rank_each_half_apart(mode):
    plus = np.array([10.0, 20.0, 20.0], np.float32)
    minus = np.array([-5.0, 100.0, 0.0], np.float32)
    expected = np.concatenate([numpy_centered_ranks(plus), numpy_centered_ranks(minus)])
    np.testing.assert_allclose(expected, [-0.5, 0.25, 0.25, -0.5, 0.5, 0.0])
    both = np.concatenate([plus, minus])
    shaped = run(lambda f: fitness.shape_fitness(f, "separate_ranks"), both, mode=mode)
    np.testing.assert_allclose(shaped, expected, atol=1e-6)
    overall = run(lambda f: fitness.shape_fitness(f, "centered_ranks"), both, mode=mode)
    np.testing.assert_allclose(overall, numpy_centered_ranks(both), atol=1e-6)
    raw = run(lambda f: fitness.shape_fitness(f, "raw"), both, mode=mode)
    np.testing.assert_array_equal(raw, both)


@pytest.mark.parametrize("mode", MODES)
def test_mirrored_gradient(mode):
    rng = np.random.default_rng(0)
    plus, minus = rng.normal(size=4).astype(np.float32), rng.normal(size=4).astype(np.float32)
    noise = rng.normal(size=(4, 3)).astype(np.float32)
    sigma = 0.1
    expected = sum((plus[i] - minus[i]) * noise[i] for i in range(4)) / (2 * 4 * sigma)
    actual = run(lambda p, m, e: gradient.mirrored_gradient(p, m, e, sigma), plus, minus, noise,
                 mode=mode)  # fmt: skip
    np.testing.assert_allclose(actual, expected, rtol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_coupled_l2_and_adam(mode):
    g = np.array([0.5, -1.0, 2.0], np.float32)
    theta = np.array([1.0, 2.0, -3.0], np.float32)
    total = run(lambda a, b: gradient.coupled_l2(a, b, 0.1), g, theta, mode=mode)
    np.testing.assert_allclose(total, [0.4, -1.2, 2.3], rtol=1e-6)
    # Two Adam steps from zero moments, by hand: lr 0.005, betas 0.9 and 0.999, eps 1e-8.
    m, v = np.zeros(3), np.zeros(3)
    expected = []
    for t in (1, 2):
        m = 0.9 * m + 0.1 * total
        v = 0.999 * v + 0.001 * total**2
        a = 0.005 * np.sqrt(1 - 0.999**t) / (1 - 0.9**t)
        expected.append((a * m / (np.sqrt(v) + 1e-8), m, v))
    m_tf, v_tf = np.zeros(3, np.float32), np.zeros(3, np.float32)
    for t, (step, m_np, v_np) in zip((1, 2), expected):
        fn = lambda gr, mm, vv, tt: tf.stack(gradient.adam_step(gr, mm, vv, tt, 0.005))  # noqa: E731
        step_tf, m_tf, v_tf = run(fn, total, m_tf, v_tf, np.float32(t), mode=mode)
        np.testing.assert_allclose(step_tf, step, rtol=1e-4)  # float32: 1 - 0.999**t
        np.testing.assert_allclose(m_tf, m_np, rtol=1e-6)
        np.testing.assert_allclose(v_tf, v_np, rtol=1e-6)
    # The first step of Adam moves each coordinate by about lr in the sign of g.
    np.testing.assert_allclose(expected[0][0], 0.005 * np.sign(total), rtol=1e-4)


NOISE = (
    "import numpy as np; from batchrl.algorithms.es import noise; "
    "np.save({path!r}, noise.member_noise(7, 12, [3, 4], 50).numpy())"
)


@pytest.mark.slow  # Out of the default suite: 14 s on 2 busy cores (2026-12-06).
def test_noise_is_the_same_in_two_processes_and_differs_between_members(tmp_path):
    path = str(tmp_path / "noise.npy")
    subprocess.run([sys.executable, "-c", NOISE.format(path=path)], check=True)
    arrays = [np.load(path), noise.member_noise(7, 12, [3, 4], 50).numpy()]  # There, here.
    np.testing.assert_array_equal(arrays[0], arrays[1])
    assert not np.allclose(arrays[0][0], arrays[0][1])  # Members 3 and 4 differ.
    here = tf.function(lambda: noise.member_noise(7, tf.constant(12), [3, 4], 50))()
    np.testing.assert_array_equal(here.numpy(), arrays[0])  # And in a graph here.
    other_generation = noise.member_noise(7, 13, [3], 50).numpy()
    assert not np.allclose(other_generation[0], arrays[0][0])
    assert abs(arrays[0].mean()) < 0.5 and 0.7 < arrays[0].std() < 1.3
