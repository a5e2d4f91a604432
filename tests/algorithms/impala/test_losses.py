"""Golden-number tests of IMPALA's losses and reward processing, eager and in tf.function."""

import numpy as np
import pytest
import tensorflow as tf

from batchrl.algorithms.impala import bootstrap, losses, rewards

MODES = ["eager", "function", "xla"]


def compile_fn(fn, mode):
    if mode == "eager":
        return fn
    return tf.function(fn, jit_compile=(mode == "xla"))


REWARDS = [-10.0, -1.5, -0.5, 0.0, 0.5, 2.0, 10.0]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "clipping, expected",
    [
        ("none", REWARDS),
        ("abs_one", [-1.0, -1.0, -0.5, 0.0, 0.5, 1.0, 1.0]),
        # 1.5 tanh(r / 5) below zero, 5 tanh(r / 5) from zero on, e.g.
        #   r = -10: 1.5 tanh(-2) = 1.5 * -0.96402758 = -1.44604137
        #   r =   2: 5 tanh(0.4) = 5 * 0.37994896 = 1.89974481
        (
            "soft_asymmetric",
            [-1.44604137, -0.43696892, -0.14950199, 0.0, 0.49833997, 1.89974481, 4.82013790],
        ),
    ],
)
def test_clip_rewards(mode, clipping, expected):
    clip = compile_fn(lambda r: rewards.clip_rewards(r, clipping), mode)
    np.testing.assert_allclose(clip(tf.constant(REWARDS)), expected, rtol=1e-6, atol=1e-7)


def test_clip_rewards_rejects_an_unknown_mode():
    with pytest.raises(ValueError, match="abs_one"):
        rewards.clip_rewards(tf.constant([1.0]), "abs_two")


# T=3 steps of B=2 agents, time-major [T, B], discount 0.9:
#   agent 0: the episode is truncated at t=1; its final observation is worth 30, so the
#            reward becomes 3 + 0.9 * 30 = 30 and the trace stops there (discount 0).
#   agent 1: terminated and truncated at t=1: terminated wins, no bootstrap (the 40 is
#            ignored), discount 0.
# Every other step keeps its reward and the discount 0.9.
@pytest.mark.parametrize("mode", MODES)
def test_truncation_bootstrap(mode):
    fn = compile_fn(bootstrap.truncation_bootstrap, mode)
    rewards, discounts = fn(
        tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]),
        tf.constant([[False, False], [False, True], [False, False]]),
        tf.constant([[False, False], [True, True], [False, False]]),
        tf.constant([[10.0, 20.0], [30.0, 40.0], [50.0, 60.0]]),
        0.9,
    )
    np.testing.assert_allclose(rewards, [[1.0, 2.0], [30.0, 4.0], [5.0, 6.0]], rtol=1e-6)
    np.testing.assert_allclose(discounts, [[0.9, 0.9], [0.0, 0.0], [0.9, 0.9]], rtol=1e-6)


# T=3 steps of B=2 agents; observations are numbers, V(x) = 10 x. The unroll's
# observations x_t are [[1, 2], [3, 4], [5, 6]] (so V = [[10, 20], [30, 40], [50, 60]]) and
# the ones each step returned x'_t are [[3, 4], [7, 6], [9, 8]]: agent 0's step 1 ended an
# episode (x'_1 = 7, not x_2 = 5).
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "truncated, calls, expected",
    [
        # Step 1 terminated: its V(x'_1) is never read, so the shift stands (V(x_2) = 50)
        # and one pass over the last step's B observations gives V(x'_2) = [90, 80].
        ([[0, 0], [0, 0], [0, 0]], [2], [[30, 40], [50, 60], [90, 80]]),
        # Step 2 (the last) truncated: still the shift and the last step's pass.
        ([[0, 0], [0, 0], [1, 0]], [2], [[30, 40], [50, 60], [90, 80]]),
        # Step 1 truncated: its V(x'_1) = 70 is read, so all T x B values are computed.
        ([[0, 0], [1, 0], [0, 0]], [2, 6], [[30, 40], [70, 60], [90, 80]]),
    ],
)
def test_next_values_shift_the_unrolls_values_unless_a_step_inside_was_truncated(
    mode, truncated, calls, expected
):
    sizes = []

    def values(observ):  # [N, 1] -> [N]
        sizes.append(int(observ.shape[0]))
        return 10.0 * observ[:, 0]

    next_observ = tf.constant([[[3.0], [4.0]], [[7.0], [6.0]], [[9.0], [8.0]]])
    value = tf.constant([[10.0, 20.0], [30.0, 40.0], [50.0, 60.0]])
    result = compile_fn(lambda t: bootstrap.next_values(values, value, next_observ, t, 1), mode)(
        tf.constant(truncated) > 0
    )
    np.testing.assert_allclose(result, expected)
    if mode == "eager":  # Traced, tf.cond builds both branches; eager runs the one taken.
        assert sizes == calls


def _value_and_gradients(loss_fn, mode, *inputs):
    """The loss and its gradients with respect to each input (None where it stops)."""

    def fn(*tensors):
        with tf.GradientTape() as tape:
            tape.watch(tensors)
            loss = loss_fn(*tensors)
        return loss, tape.gradient(loss, tensors)

    tensors = [tf.constant(x) for x in inputs]
    return compile_fn(fn, mode)(*tensors)


@pytest.mark.parametrize("mode", MODES)
def test_policy_gradient_loss(mode):
    # log_prob * A = [[-2, 2], [-2, -1.5]], sum -3.5, mean -0.875, negated 0.875.
    # d loss / d log_prob = -A / 4; no gradient flows into the advantages.
    log_prob = [[-1.0, -2.0], [-0.5, -3.0]]
    advantages = [[2.0, -1.0], [4.0, 0.5]]
    loss, (d_log_prob, d_advantages) = _value_and_gradients(
        losses.policy_gradient_loss, mode, log_prob, advantages
    )
    np.testing.assert_allclose(loss, 0.875, rtol=1e-6)
    np.testing.assert_allclose(d_log_prob, [[-0.5, 0.25], [-1.0, -0.125]], rtol=1e-6)
    assert d_advantages is None


@pytest.mark.parametrize("mode", MODES)
def test_baseline_loss(mode):
    # vs - V = [[1, -2], [0, 3]], squares [[1, 4], [0, 9]], mean 3.5, half 1.75.
    # d loss / d V = -(vs - V) / 4; no gradient flows into the targets.
    vs = [[1.0, 2.0], [3.0, 4.0]]
    values = [[0.0, 4.0], [3.0, 1.0]]
    loss, (d_vs, d_values) = _value_and_gradients(losses.baseline_loss, mode, vs, values)
    np.testing.assert_allclose(loss, 1.75, rtol=1e-6)
    np.testing.assert_allclose(d_values, [[-0.25, 0.5], [0.0, -0.75]], rtol=1e-6)
    assert d_vs is None


@pytest.mark.parametrize("mode", MODES)
def test_entropy_loss(mode):
    # The mean entropy is 1.25; the loss is its negative, with gradient -1/4 each.
    entropy = [[0.5, 1.0], [1.5, 2.0]]
    loss, (d_entropy,) = _value_and_gradients(losses.entropy_loss, mode, entropy)
    np.testing.assert_allclose(loss, -1.25, rtol=1e-6)
    np.testing.assert_allclose(d_entropy, [[-0.25, -0.25], [-0.25, -0.25]], rtol=1e-6)
