"""Golden-number tests of V-trace against the paper's n-step sum definition."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

from batchrl.algorithms.impala import vtrace


def _reference_vtrace(
    log_rhos, discounts, rewards, values, bootstrap_value, clip_rho, clip_pg_rho, lambda_
):
    """Straight from the IMPALA paper's sum, with per-step discounts; float64 numpy."""
    log_rhos, discounts, rewards, values, bootstrap_value = (
        np.asarray(x, np.float64) for x in (log_rhos, discounts, rewards, values, bootstrap_value)
    )
    rhos = np.exp(log_rhos)
    clipped_rhos = rhos if clip_rho is None else np.minimum(clip_rho, rhos)
    clipped_pg_rhos = rhos if clip_pg_rho is None else np.minimum(clip_pg_rho, rhos)
    cs = lambda_ * np.minimum(1.0, rhos)
    all_values = np.concatenate([values, bootstrap_value[None]], axis=0)  # [T + 1, B, ...]
    num_steps = values.shape[0]
    vs = np.zeros_like(values)
    for s in range(num_steps):
        total = np.copy(values[s])
        for t in range(s, num_steps):
            discount_prod = np.prod(discounts[s:t], axis=0)  # 1 for t == s.
            c_prod = np.prod(cs[s:t], axis=0)
            delta = clipped_rhos[t] * (
                rewards[t] + discounts[t] * all_values[t + 1] - all_values[t]
            )
            total += discount_prod * c_prod * delta
        vs[s] = total
    next_vs = np.concatenate([vs[1:], bootstrap_value[None]], axis=0)
    pg_advantages = clipped_pg_rhos * (rewards + discounts * next_vs - values)
    return vs, pg_advantages


def _random_inputs(seed, shape):
    """Random V-trace inputs of `shape` [T, B, ...]; discounts in [0, 1] with zeros."""
    rng = np.random.default_rng(seed)
    log_rhos = rng.normal(0.0, 1.0, shape)  # rhos on both sides of the thresholds.
    discounts = rng.uniform(0.0, 1.0, shape)
    discounts[rng.uniform(size=shape) < 0.25] = 0.0
    rewards = rng.normal(0.0, 1.0, shape)
    values = rng.normal(0.0, 1.0, shape)
    bootstrap_value = rng.normal(0.0, 1.0, shape[1:])
    inputs = dict(
        log_rhos=log_rhos,
        discounts=discounts,
        rewards=rewards,
        values=values,
        bootstrap_value=bootstrap_value,
    )
    return {key: value.astype(np.float32) for key, value in inputs.items()}


def _run(mode, inputs, **kwargs):
    """Calls `from_importance_weights` eagerly or inside a (possibly XLA) tf.function."""
    tensors = {key: tf.constant(value) for key, value in inputs.items()}
    if mode == "eager":
        return vtrace.from_importance_weights(**tensors, **kwargs)
    function = tf.function(
        lambda tensors: vtrace.from_importance_weights(**tensors, **kwargs),
        jit_compile=(mode == "xla"),
    )
    return function(tensors)


@pytest.mark.parametrize("mode", ["eager", "function"])
@pytest.mark.parametrize("shape", [(6, 1), (6, 5), (1, 5), (5, 3, 2)])
@pytest.mark.parametrize(
    "clip_rho, clip_pg_rho, lambda_",
    [
        (1.0, 1.0, 1.0),
        (None, None, 1.0),
        (0.5, 2.0, 1.0),
        (2.0, None, 0.7),
        (None, 0.3, 0.0),
    ],
)
def test_matches_sum_definition(mode, shape, clip_rho, clip_pg_rho, lambda_):
    inputs = _random_inputs(seed=sum(shape), shape=shape)
    expected_vs, expected_pg = _reference_vtrace(
        **inputs, clip_rho=clip_rho, clip_pg_rho=clip_pg_rho, lambda_=lambda_
    )
    output = _run(
        mode,
        inputs,
        clip_rho_threshold=clip_rho,
        clip_pg_rho_threshold=clip_pg_rho,
        lambda_=lambda_,
    )
    assert isinstance(output, vtrace.VTraceReturns)
    assert output.vs.shape == shape
    assert output.pg_advantages.shape == shape
    np.testing.assert_allclose(output.vs.numpy(), expected_vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(output.pg_advantages.numpy(), expected_pg, rtol=1e-5, atol=1e-5)


def test_matches_sum_definition_under_xla():
    inputs = _random_inputs(seed=3, shape=(5, 4))
    expected_vs, expected_pg = _reference_vtrace(
        **inputs, clip_rho=1.0, clip_pg_rho=1.0, lambda_=0.9
    )
    output = _run("xla", inputs, lambda_=0.9)
    np.testing.assert_allclose(output.vs.numpy(), expected_vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(output.pg_advantages.numpy(), expected_pg, rtol=1e-5, atol=1e-5)


def test_thresholds_change_the_result():
    # Guards the reference itself: with rhos far from 1 every threshold matters.
    inputs = _random_inputs(seed=4, shape=(4, 5))
    inputs["log_rhos"] = 2.0 * inputs["log_rhos"]
    base = _run("eager", inputs)
    unclipped = _run("eager", inputs, clip_rho_threshold=None)
    pg_unclipped = _run("eager", inputs, clip_pg_rho_threshold=None)
    short_traces = _run("eager", inputs, lambda_=0.5)
    assert not np.allclose(base.vs, unclipped.vs)
    np.testing.assert_allclose(base.vs, pg_unclipped.vs)
    assert not np.allclose(base.pg_advantages, pg_unclipped.pg_advantages)
    assert not np.allclose(base.vs, short_traces.vs)


def test_on_policy_without_discount_is_reward_to_go():
    # rho = c = 1 and gamma = 1: v_s = sum_{t>=s} r_t + bootstrap, the Monte Carlo return.
    rewards = np.array([[1.0], [2.0], [3.0]], np.float32)  # [T=3, B=1]
    inputs = dict(
        log_rhos=np.zeros_like(rewards),
        discounts=np.ones_like(rewards),
        rewards=rewards,
        values=np.array([[0.5], [-1.0], [4.0]], np.float32),
        bootstrap_value=np.array([10.0], np.float32),
    )
    output = _run("eager", inputs)
    np.testing.assert_allclose(output.vs.numpy(), [[16.0], [15.0], [13.0]])
    # A_s = r_s + v_{s+1} - V(x_s): 1 + 15 - 0.5, 2 + 13 + 1, 3 + 10 - 4.
    np.testing.assert_allclose(output.pg_advantages.numpy(), [[15.5], [16.0], [9.0]])


@pytest.mark.parametrize("mode", ["eager", "function"])
def test_no_gradient_through_outputs(mode):
    inputs = _random_inputs(seed=5, shape=(4, 3))
    log_rhos = tf.Variable(inputs["log_rhos"])
    values = tf.Variable(inputs["values"])
    bootstrap_value = tf.Variable(inputs["bootstrap_value"])

    def gradients():
        with tf.GradientTape(persistent=True) as tape:
            output = vtrace.from_importance_weights(
                log_rhos=log_rhos,
                discounts=inputs["discounts"],
                rewards=inputs["rewards"],
                values=values,
                bootstrap_value=bootstrap_value,
            )
            loss = tf.reduce_sum(output.vs) + tf.reduce_sum(output.pg_advantages)
            # A live path from the variables, so the check below can tell the two apart.
            live = loss + tf.reduce_sum(values) + tf.reduce_sum(log_rhos)
        targets = [log_rhos, values, bootstrap_value]
        return tape.gradient(loss, targets), tape.gradient(live, targets)

    if mode == "function":
        gradients = tf.function(gradients)
    stopped, live = gradients()
    for gradient in stopped:
        assert gradient is None or not np.any(gradient.numpy())
    assert np.all(live[0].numpy() == 1.0)
    assert np.all(live[1].numpy() == 1.0)


@pytest.mark.parametrize(
    "name, shape",
    [
        ("log_rhos", (4, 3, 1)),
        ("discounts", (4,)),
        ("rewards", (4, 3, 2)),
        ("bootstrap_value", (4, 3)),
        ("bootstrap_value", ()),
        ("values", (4,)),
    ],
)
def test_wrong_rank_raises(name, shape):
    inputs = _random_inputs(seed=6, shape=(4, 3))
    if name == "values":
        # With rank-1 values every other input is also made consistent, so only the
        # [T, B, ...] requirement on values can fail.
        inputs = {key: value[:, 0] for key, value in inputs.items() if key != "bootstrap_value"}
        inputs["bootstrap_value"] = np.float32(0.0)
    else:
        inputs[name] = np.zeros(shape, np.float32)
    with pytest.raises(ValueError, match=name):
        vtrace.from_importance_weights(**inputs)


def test_wrong_static_shape_raises_inside_function():
    inputs = _random_inputs(seed=7, shape=(4, 3))
    function = tf.function(vtrace.from_importance_weights)
    with pytest.raises(ValueError, match="bootstrap_value"):
        function(**{**inputs, "bootstrap_value": np.zeros([2], np.float32)})
    with pytest.raises(ValueError, match="rewards"):
        function(**{**inputs, "rewards": np.zeros([4, 2], np.float32)})


def test_unknown_time_and_batch_dims_in_function():
    inputs = _random_inputs(seed=8, shape=(5, 2))
    expected_vs, expected_pg = _reference_vtrace(
        **inputs, clip_rho=1.0, clip_pg_rho=1.0, lambda_=1.0
    )
    spec = tf.TensorSpec([None, None], tf.float32)
    function = tf.function(
        vtrace.from_importance_weights,
        input_signature=[spec] * 4 + [tf.TensorSpec([None], tf.float32)],
    )
    output = function(
        inputs["log_rhos"],
        inputs["discounts"],
        inputs["rewards"],
        inputs["values"],
        inputs["bootstrap_value"],
    )
    np.testing.assert_allclose(output.vs.numpy(), expected_vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(output.pg_advantages.numpy(), expected_pg, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["eager", "function"])
def test_log_rhos_from_logits(mode):
    rng = np.random.default_rng(9)
    behaviour_logits = rng.normal(size=(4, 3, 6)).astype(np.float32)  # [T, B, A]
    target_logits = rng.normal(size=(4, 3, 6)).astype(np.float32)  # [T, B, A]
    actions = rng.integers(0, 6, size=(4, 3)).astype(np.int32)  # [T, B]

    def log_softmax(logits):
        shifted = logits - logits.max(axis=-1, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))

    def at_actions(log_probs):
        return np.take_along_axis(log_probs, actions[..., None], axis=-1)[..., 0]

    expected = at_actions(log_softmax(target_logits)) - at_actions(log_softmax(behaviour_logits))
    function = vtrace.log_rhos_from_logits
    if mode == "function":
        function = tf.function(function)
    log_rhos = function(behaviour_logits, target_logits, actions)
    assert log_rhos.shape == (4, 3)
    np.testing.assert_allclose(log_rhos.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_log_rhos_from_logits_wrong_rank_raises():
    logits = np.zeros((4, 3, 6), np.float32)
    with pytest.raises(ValueError, match="actions"):
        vtrace.log_rhos_from_logits(logits, logits, np.zeros((4, 3, 1), np.int32))
    with pytest.raises(ValueError, match="target_logits"):
        vtrace.log_rhos_from_logits(logits, logits[0], np.zeros((4, 3), np.int32))


@pytest.mark.parametrize("mode", ["eager", "function"])
def test_log_rhos_from_gaussian_distributions(mode):
    rng = np.random.default_rng(10)
    shape = (4, 3, 2)  # [T, B, action_dim]
    behaviour_mean, target_mean, actions = (rng.normal(size=shape) for _ in range(3))
    behaviour_std, target_std = (rng.uniform(0.5, 2.0, size=shape) for _ in range(2))

    def gaussian_log_prob(mean, std):
        log_probs = -0.5 * ((actions - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)
        return log_probs.sum(axis=-1)  # [T, B]

    expected = gaussian_log_prob(target_mean, target_std) - gaussian_log_prob(
        behaviour_mean, behaviour_std
    )

    def log_rhos_fn(behaviour_mean, behaviour_std, target_mean, target_std, actions):
        normal = tfp.distributions.Normal
        behaviour = tfp.distributions.Independent(normal(behaviour_mean, behaviour_std), 1)
        target = tfp.distributions.Independent(normal(target_mean, target_std), 1)
        return vtrace.log_rhos_from_distributions(behaviour, target, actions)

    if mode == "function":
        log_rhos_fn = tf.function(log_rhos_fn)
    arguments = (behaviour_mean, behaviour_std, target_mean, target_std, actions)
    log_rhos = log_rhos_fn(*(tf.constant(x, tf.float32) for x in arguments))
    assert log_rhos.shape == (4, 3)
    np.testing.assert_allclose(log_rhos.numpy(), expected, rtol=1e-4, atol=1e-4)
