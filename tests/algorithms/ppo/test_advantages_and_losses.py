"""Golden-number tests of the PPO math, each run eagerly and inside tf.function."""

import math

import numpy as np
import pytest
import tensorflow as tf

from batchrl.algorithms.ppo import advantages, losses

MODES = ["eager", "function"]
MODES_XLA = ["eager", "function", "xla"]


def compile_fn(fn, mode):
    if mode == "eager":
        return fn
    return tf.function(fn, jit_compile=(mode == "xla"))


# A rollout of T=4 steps for B=3 agents, time-major [T, B]. `next_value[t]` is the value
# of the observation step t returned; 99 marks values that must be ignored.
#
#   agent 0: one episode through the whole rollout; t=3 is the rollout boundary and
#            bootstraps from next_value[3] = 4.
#   agent 1: episode terminates at t=1 (next_value 99 ignored); a new episode starts at
#            t=2 and is truncated at t=3, bootstrapping from its final value 6.
#   agent 2: truncated at t=0 (final value 5, no advantage carried from t=1); a new
#            episode terminates at t=2 (99 ignored); another starts at t=3, rollout
#            boundary bootstraps from 3.
REWARD = [[1.0, 0.0, 2.0], [0.0, 1.0, 1.0], [2.0, 1.0, 0.0], [1.0, 2.0, 1.0]]
VALUE = [[1.0, 2.0, 3.0], [2.0, 1.0, 4.0], [3.0, 2.0, 1.0], [1.0, 3.0, 2.0]]
NEXT_VALUE = [[2.0, 1.0, 5.0], [3.0, 99.0, 1.0], [1.0, 3.0, 99.0], [4.0, 6.0, 3.0]]
TERMINATED = [[False, False, False], [False, True, False], [False, False, True], [False] * 3]
TRUNCATED = [[False, False, True], [False, False, False], [False] * 3, [False, True, False]]

# discount = lambda_ = 0.5, worked by hand backwards in time, e.g. agent 2:
#   t=3: delta = 1 + 0.5 * 3 - 2 = 0.5                          A = 0.5
#   t=2: terminated, delta = 0 - 1 = -1                          A = -1
#   t=1: delta = 1 + 0.5 * 1 - 4 = -2.5                          A = -2.5 + 0.25 * -1 = -2.75
#   t=0: truncated, delta = 2 + 0.5 * 5 - 3 = 1.5, no carry     A = 1.5
GAE_HALF = [[0.875, -1.5, 1.5], [-0.5, 0.0, -2.75], [0.0, 1.0, -1.0], [2.0, 2.0, 0.5]]
# discount = 0.9, lambda_ = 0: one-step TD errors.
GAE_TD = [[1.8, -1.1, 3.5], [0.7, 0.0, -2.1], [-0.1, 1.7, -1.0], [3.6, 4.4, 1.7]]
# discount = lambda_ = 1: returns are undiscounted sums of rewards to the episode end,
# plus the bootstrap value at a truncation or at the rollout boundary.
#   agent 0, t=0: 1 + 0 + 2 + 1 + 4 = 8      agent 1, t=2: 1 + 2 + 6 = 9
#   agent 2, t=0: 2 + 5 = 7                  agent 2, t=2: 0 (terminated)
RETURN_SUM = [[8.0, 1.0, 7.0], [7.0, 1.0, 1.0], [7.0, 9.0, 0.0], [5.0, 8.0, 4.0]]


def reference_gae(discount, lambda_):
    """The formula as a plain loop, to check the golden arrays themselves."""
    reward, value, next_value = np.array(REWARD), np.array(VALUE), np.array(NEXT_VALUE)
    terminated, truncated = np.array(TERMINATED), np.array(TRUNCATED)
    advantage, carry = np.zeros_like(reward), np.zeros(reward.shape[1])
    for t in reversed(range(reward.shape[0])):
        delta = reward[t] + discount * (1 - terminated[t]) * next_value[t] - value[t]
        done = terminated[t] | truncated[t]
        carry = delta + discount * lambda_ * (1 - done) * carry
        advantage[t] = carry
    return advantage


@pytest.mark.parametrize(
    "discount, lambda_, golden",
    [(0.5, 0.5, GAE_HALF), (0.9, 0.0, GAE_TD), (1.0, 1.0, np.subtract(RETURN_SUM, VALUE))],
)
def test_golden_arrays_match_reference_loop(discount, lambda_, golden):
    np.testing.assert_allclose(reference_gae(discount, lambda_), golden, atol=1e-12)


@pytest.mark.parametrize("mode", MODES_XLA)
@pytest.mark.parametrize(
    "discount, lambda_, golden",
    [(0.5, 0.5, GAE_HALF), (0.9, 0.0, GAE_TD), (1.0, 1.0, np.subtract(RETURN_SUM, VALUE))],
)
def test_gae(mode, discount, lambda_, golden):
    fn = compile_fn(advantages.gae, mode)
    advantage = fn(
        tf.constant(REWARD),
        tf.constant(VALUE),
        tf.constant(NEXT_VALUE),
        tf.constant(TERMINATED),
        tf.constant(TRUNCATED),
        discount,
        lambda_,
    )
    assert advantage.shape == (4, 3)
    np.testing.assert_allclose(advantage.numpy(), golden, atol=1e-6)


def test_gae_dynamic_length_and_no_gradient():
    fn = tf.function(
        advantages.gae,
        input_signature=[tf.TensorSpec([None, None], tf.float32)] * 3
        + [tf.TensorSpec([None, None], tf.bool)] * 2
        + [tf.TensorSpec([], tf.float32)] * 2,
    )
    args = [tf.constant(x) for x in (REWARD, VALUE, NEXT_VALUE, TERMINATED, TRUNCATED)]
    np.testing.assert_allclose(fn(*args, 0.5, 0.5).numpy(), GAE_HALF, atol=1e-6)
    np.testing.assert_allclose(fn(*[x[2:] for x in args], 0.5, 0.5).numpy(), GAE_HALF[2:])
    value = tf.Variable(VALUE)
    with tf.GradientTape() as tape:
        advantage = advantages.gae(args[0], value, args[2], args[3], args[4], 0.5, 0.5)
    assert tape.gradient(advantage, value) is None


@pytest.mark.parametrize("mode", MODES)
def test_lambda_returns_is_advantage_plus_value(mode):
    fn = compile_fn(advantages.lambda_returns, mode)
    args = [tf.constant(x) for x in (REWARD, VALUE, NEXT_VALUE, TERMINATED, TRUNCATED)]
    np.testing.assert_allclose(fn(*args, 0.5, 0.5).numpy(), np.add(GAE_HALF, VALUE), atol=1e-6)
    np.testing.assert_allclose(fn(*args, 1.0, 1.0).numpy(), RETURN_SUM, atol=1e-6)


@pytest.mark.parametrize("mode", MODES_XLA)
def test_discounted_return(mode):
    fn = compile_fn(advantages.discounted_return, mode)
    args = [tf.constant(x) for x in (REWARD, NEXT_VALUE, TERMINATED, TRUNCATED)]
    np.testing.assert_allclose(fn(*args, 1.0).numpy(), RETURN_SUM, atol=1e-6)
    # discount 0.5, agent 0: t=3: 1 + 0.5 * 4 = 3, t=2: 2 + 1.5 = 3.5,
    # t=1: 0 + 1.75 = 1.75, t=0: 1 + 0.875 = 1.875. Agent 1, t=3: 2 + 0.5 * 6 = 5,
    # t=2: 1 + 2.5 = 3.5. Agent 2, t=0: 2 + 0.5 * 5 = 4.5, t=1: 1 + 0 = 1.
    golden = [[1.875, 0.5, 4.5], [1.75, 1.0, 1.0], [3.5, 3.5, 0.0], [3.0, 5.0, 2.5]]
    np.testing.assert_allclose(fn(*args, 0.5).numpy(), golden, atol=1e-6)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "coefficient, kl, expected",
    [
        (2.0, 1.5, 3.0),  # kl > 1.3 * target: multiply by 1.5
        (2.0, 0.5, 2.0 / 1.5),  # kl < 0.7 * target: divide by 1.5
        (2.0, 1.0, 2.0),  # within [0.7, 1.3] * target: unchanged
        (2.0, 1.3, 2.0),  # boundaries are inclusive of "unchanged"
        (2.0, 0.7, 2.0),
        (1e6, 5.0, 1e6),  # clipped above
        (1e-6, 0.0, 1e-6),  # clipped below
    ],
)
def test_update_penalty_coefficient(mode, coefficient, kl, expected):
    fn = compile_fn(losses.update_penalty_coefficient, mode)
    new = fn(tf.constant(coefficient, tf.float64), tf.constant(kl, tf.float64), 1.0)
    assert new.dtype == tf.float64
    assert new.numpy() == pytest.approx(expected, rel=1e-12)


def test_update_penalty_coefficient_accepts_variable():
    coefficient = tf.Variable(1.0)
    coefficient.assign(losses.update_penalty_coefficient(coefficient, 0.05, 0.01))
    assert coefficient.numpy() == pytest.approx(1.5)


# Four steps as [2, 2]: ratios 1.5, 0.5, 1.1, 0.7 with advantages 1, 1, -1, -2.
RATIO = [[1.5, 0.5], [1.1, 0.7]]
ADVANTAGE = [[1.0, 1.0], [-1.0, -2.0]]


@pytest.mark.parametrize("mode", MODES)
def test_clipped_surrogate_loss(mode):
    # eps = 0.2:  min(1.5, 1.2) = 1.2 (clipped)   min(0.5, 0.8) = 0.5 (|0.5 - 1| > 0.2)
    #             min(-1.1, -1.1) = -1.1          min(-1.4, -1.6) = -1.6 (clipped)
    # loss = -(1.2 + 0.5 - 1.1 - 1.6) / 4 = 0.25, three of four outside the clip range.
    fn = compile_fn(losses.clipped_surrogate_loss, mode)
    log_prob_new = tf.math.log(tf.constant(RATIO))
    log_prob_old = tf.zeros([2, 2])
    loss, extra = fn(log_prob_new, log_prob_old, tf.constant(ADVANTAGE), 0.2)
    assert loss.numpy() == pytest.approx(0.25, abs=1e-6)
    assert extra.clip_fraction.numpy() == pytest.approx(0.75, abs=1e-6)
    assert extra.mean_ratio.numpy() == pytest.approx(0.95, abs=1e-6)
    # Masking the last step: -(1.2 + 0.5 - 1.1) / 3 = -0.2, two of three clipped.
    mask = tf.constant([[True, True], [True, False]])
    loss, extra = fn(log_prob_new, log_prob_old, tf.constant(ADVANTAGE), 0.2, mask)
    assert loss.numpy() == pytest.approx(-0.2, abs=1e-6)
    assert extra.clip_fraction.numpy() == pytest.approx(2 / 3, abs=1e-6)


def test_clipped_surrogate_loss_gradient_vanishes_where_clipped():
    # d loss / d log_prob_new = -ratio * A / N where the unclipped term is the minimum,
    # else 0: [[0 (clipped), -0.5 / 4], [1.1 / 4, 0 (clipped)]].
    log_prob_new = tf.Variable(tf.math.log(tf.constant(RATIO)))
    with tf.GradientTape() as tape:
        loss, _ = losses.clipped_surrogate_loss(
            log_prob_new, tf.zeros([2, 2]), tf.constant(ADVANTAGE), 0.2
        )
    grad = tape.gradient(loss, log_prob_new)
    np.testing.assert_allclose(grad.numpy(), [[0.0, -0.125], [0.275, 0.0]], atol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_kl_penalty_loss_with_cutoff(mode):
    # ratios 1, 2, 0.5, 1 with advantages 1, 1, 2, -1: surrogate = -(1 + 2 + 1 - 1) / 4.
    # kl 0.1, 0.3, 0.0, 0.2 with coefficient 2: penalty = 2 * 0.15 = 0.3.
    # threshold 2 * 0.1 = 0.2; only 0.3 exceeds it: cutoff = 1000 * 0.1^2 / 4 = 2.5.
    fn = compile_fn(losses.kl_penalty_loss, mode)
    log_prob_new = tf.math.log(tf.constant([[1.0, 2.0], [0.5, 1.0]]))
    log_prob_old = tf.zeros([2, 2])
    advantage = tf.constant([[1.0, 1.0], [2.0, -1.0]])
    kl = tf.constant([[0.1, 0.3], [0.0, 0.2]])
    loss, extra = fn(log_prob_new, log_prob_old, advantage, kl, 2.0, 0.1)
    assert extra.surrogate_loss.numpy() == pytest.approx(-0.75, abs=1e-6)
    assert extra.mean_kl.numpy() == pytest.approx(0.15, abs=1e-6)
    assert extra.kl_penalty.numpy() == pytest.approx(0.3, abs=1e-6)
    assert extra.kl_cutoff.numpy() == pytest.approx(2.5, rel=1e-4)
    assert extra.cutoff_fraction.numpy() == pytest.approx(0.25)
    assert loss.numpy() == pytest.approx(2.05, rel=1e-4)
    # A softer cutoff: factor 2.5 puts the threshold at 0.25, excess 0.05, coef 100:
    # cutoff = 100 * 0.05^2 / 4 = 0.0625.
    loss, extra = fn(log_prob_new, log_prob_old, advantage, kl, 2.0, 0.1, 2.5, 100.0)
    assert extra.kl_cutoff.numpy() == pytest.approx(0.0625, rel=1e-4)
    assert loss.numpy() == pytest.approx(-0.75 + 0.3 + 0.0625, rel=1e-4)


@pytest.mark.parametrize("mode", MODES)
def test_kl_penalty_loss_masked_without_cutoff(mode):
    # Masking the step with kl 0.3 leaves no kl above 0.2:
    # surrogate = -(1 + 1 - 1) / 3, penalty = 2 * (0.1 + 0 + 0.2) / 3 = 0.2, cutoff = 0.
    fn = compile_fn(losses.kl_penalty_loss, mode)
    log_prob_new = tf.math.log(tf.constant([[1.0, 2.0], [0.5, 1.0]]))
    advantage = tf.constant([[1.0, 1.0], [2.0, -1.0]])
    kl = tf.constant([[0.1, 0.3], [0.0, 0.2]])
    mask = tf.constant([[1.0, 0.0], [1.0, 1.0]])
    loss, extra = fn(log_prob_new, tf.zeros([2, 2]), advantage, kl, 2.0, 0.1, mask=mask)
    assert extra.surrogate_loss.numpy() == pytest.approx(-1 / 3, abs=1e-6)
    assert extra.kl_penalty.numpy() == pytest.approx(0.2, abs=1e-6)
    assert extra.kl_cutoff.numpy() == 0.0
    assert extra.cutoff_fraction.numpy() == 0.0
    assert loss.numpy() == pytest.approx(-1 / 3 + 0.2, abs=1e-6)


def test_kl_penalty_loss_gradient():
    # d loss / d kl = coefficient / N + cutoff_coef * 2 * relu(kl - 0.2) / N.
    kl = tf.Variable([[0.1, 0.3], [0.0, 0.2]])
    with tf.GradientTape() as tape:
        loss, _ = losses.kl_penalty_loss(
            tf.zeros([2, 2]), tf.zeros([2, 2]), tf.ones([2, 2]), kl, 2.0, 0.1
        )
    expected = [[0.5, 0.5 + 1000 * 2 * 0.1 / 4], [0.5, 0.5]]
    np.testing.assert_allclose(tape.gradient(loss, kl).numpy(), expected, rtol=1e-4)


@pytest.mark.parametrize("mode", MODES)
def test_value_loss(mode):
    value = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    target = tf.constant([[0.0, 2.0], [5.0, 4.0]])
    old_value = tf.constant([[0.0, 2.0], [2.0, 5.0]])
    # Unclipped: 0.5 * (1 + 0 + 4 + 0) / 4.
    fn = compile_fn(lambda *args, **kwargs: losses.value_loss(*args, **kwargs), mode)
    assert fn(value, target).numpy() == pytest.approx(0.625)
    # Clipped with 0.5: V_clip = [0.5, 2, 2.5, 4.5], squared errors [0.25, 0, 6.25, 0.25],
    # elementwise max [1, 0, 6.25, 0.25]: 0.5 * 7.5 / 4.
    assert fn(value, target, old_value, 0.5).numpy() == pytest.approx(0.9375)
    # Masking the third step: 0.5 * (1 + 0 + 0) / 3.
    mask = tf.constant([[True, True], [False, True]])
    assert fn(value, target, mask=mask).numpy() == pytest.approx(1 / 6)


def test_value_loss_clip_needs_old_value():
    with pytest.raises(ValueError, match="old_value"):
        losses.value_loss(tf.zeros([2]), tf.zeros([2]), clip=0.2)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "prediction, target, mask, expected",
    [
        ([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], None, 1.0),  # perfect
        ([0.0, 1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0], None, 1.0),  # constant offset
        ([2.5, 2.5, 2.5, 2.5], [1.0, 2.0, 3.0, 4.0], None, 0.0),  # the mean
        ([2.0, 1.0, 4.0, 3.0], [1.0, 2.0, 3.0, 4.0], None, 0.2),  # 1 - 1 / 1.25
        ([4.0, 3.0, 2.0, 1.0], [1.0, 2.0, 3.0, 4.0], None, -3.0),  # 1 - 5 / 1.25
        ([1.0, 5.0, 0.0, 2.0], [3.0, 3.0, 3.0, 3.0], None, 0.0),  # Var[target] = 0
        ([1.0, 2.0, 3.0, 0.0], [1.0, 2.0, 3.0, 100.0], [1, 1, 1, 0], 1.0),  # masked
    ],
)
def test_explained_variance(mode, prediction, target, mask, expected):
    fn = compile_fn(advantages.explained_variance, mode)
    mask = None if mask is None else tf.constant(mask)
    result = fn(tf.constant(prediction), tf.constant(target), mask)
    assert result.numpy() == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_masked_mean(mode):
    fn = compile_fn(advantages.masked_mean, mode)
    x = tf.constant([[1.0, 2.0], [3.0, math.nan]])
    assert fn(x, tf.constant([[True, True], [True, False]])).numpy() == pytest.approx(2.0)
    assert fn(x, tf.constant([[0.0, 1.0], [1.0, 0.0]])).numpy() == pytest.approx(2.5)
    assert fn(x, tf.zeros([2, 2])).numpy() == 0.0
    assert fn(x[0], None).numpy() == pytest.approx(1.5)
    # A [B] mask broadcasts over time [T, B].
    assert fn(x, tf.constant([True, False])).numpy() == pytest.approx(2.0)


@pytest.mark.parametrize("mode", MODES_XLA)
def test_normalize_advantage(mode):
    fn = compile_fn(advantages.normalize_advantage, mode)
    advantage = tf.constant([[1.0, 2.0], [3.0, 100.0]])
    # Mean 2 and std sqrt(2/3) over the three valid entries; the padded one is ignored.
    result = fn(advantage, tf.constant([[True, True], [True, False]])).numpy()
    std = math.sqrt(2 / 3)
    np.testing.assert_allclose(result[:, 0], [-1 / std, 1 / std], rtol=1e-6)
    np.testing.assert_allclose(result[0, 1], 0.0, atol=1e-6)


@pytest.mark.parametrize("mode", MODES_XLA)
def test_clip_by_member_norm_clips_each_member_as_clip_by_global_norm(mode):
    fn = compile_fn(losses.clip_by_member_norm, mode)
    # Member 0: norm 5 (3, 4), clipped to 1; member 1: norm 0.5, unchanged.
    first = tf.constant([[3.0], [0.3]])  # [M, 1]
    second = tf.constant([[[0.0, 4.0]], [[0.0, 0.4]]])  # [M, 1, 2]
    (clipped_first, clipped_second), norm = fn([first, second], 1.0)
    np.testing.assert_allclose(norm.numpy(), [5.0, 0.5], rtol=1e-6)
    np.testing.assert_allclose(clipped_first.numpy(), [[0.6], [0.3]], rtol=1e-6)
    np.testing.assert_allclose(clipped_second.numpy(), [[[0.0, 0.8]], [[0.0, 0.4]]], rtol=1e-6)
    for member in range(2):
        expected, global_norm = tf.clip_by_global_norm([first[member], second[member]], 1.0)
        assert norm[member].numpy() == pytest.approx(global_norm.numpy(), rel=1e-6)
        np.testing.assert_allclose(clipped_second[member], expected[1], rtol=1e-6)


def test_losses_over_a_member_axis_equal_each_members_own():
    """With axis=-1, rows [M, n] and settings [M] give each member's loss [M], equal to
    the scalar call on its row with its settings (population PPO's batched loss)."""
    rng = np.random.default_rng(0)
    members, steps = 3, 7
    new, old, advantage, kl = (
        rng.normal(size=(members, steps)).astype(np.float32) for _ in range(4)
    )
    kl = np.abs(kl)
    value, target, old_value = (
        rng.normal(size=(members, steps)).astype(np.float32) for _ in range(3)
    )
    mask = rng.random((members, steps)) > 0.2
    clip = np.array([0.1, 0.2, 0.3], np.float32)
    target_kl, factor, coef = (
        np.float32([0.01, 0.5, 0.1]),
        np.float32([2.0, 1.5, 1.0]),
        np.float32([1000, 10, 1]),
    )
    penalty = np.float32([1.0, 0.5, 2.0])
    batched = losses.clipped_surrogate_loss(new, old, advantage, clip, mask, axis=-1)
    kl_batched = losses.kl_penalty_loss(
        new, old, advantage, kl, penalty, target_kl, factor, coef, mask, axis=-1
    )
    value_batched = losses.value_loss(value, target, old_value, clip, mask, axis=-1)
    for m in range(members):
        own = losses.clipped_surrogate_loss(new[m], old[m], advantage[m], clip[m], mask[m])
        np.testing.assert_allclose(batched[0][m], own[0], rtol=1e-6)
        np.testing.assert_allclose(batched[1].clip_fraction[m], own[1].clip_fraction, rtol=1e-6)
        own_kl = losses.kl_penalty_loss(
            new[m],
            old[m],
            advantage[m],
            kl[m],
            penalty[m],
            target_kl[m],
            factor[m],
            coef[m],
            mask[m],
        )
        np.testing.assert_allclose(kl_batched[0][m], own_kl[0], rtol=1e-5)
        np.testing.assert_allclose(kl_batched[1].cutoff_fraction[m], own_kl[1].cutoff_fraction)
        own_value = losses.value_loss(value[m], target[m], old_value[m], clip[m], mask[m])
        np.testing.assert_allclose(value_batched[m], own_value, rtol=1e-6)
