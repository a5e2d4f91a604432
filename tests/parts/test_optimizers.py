"""batchrl.parts.optimizers.Adam against Keras's Adam and a NumPy reference."""

import numpy as np
import pytest
import tensorflow as tf

from batchrl.parts import optimizers

LEARNING_RATE, EPSILON, BETA_1, BETA_2 = 0.01, 1e-5, 0.9, 0.999
STEPS = 5


def _problem():
    """Two variables and a loss whose gradients change from step to step."""
    weights = tf.Variable([[0.5, -1.0], [2.0, 0.25]], name="w")
    bias = tf.Variable([0.1, -0.3], name="b")
    x = tf.constant([[1.0, 2.0], [-0.5, 3.0], [0.25, -1.0]])
    y = tf.constant([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])

    def loss():
        return tf.reduce_sum(tf.tanh(x @ weights + bias - y) ** 2)

    return [weights, bias], loss


def _train(optimizer, mode):
    variables, loss = _problem()
    optimizer.build(variables)

    def step():
        with tf.GradientTape() as tape:
            value = loss()
        optimizer.apply_gradients(zip(tape.gradient(value, variables), variables))

    if mode != "eager":
        step = tf.function(step, jit_compile=mode == "xla")
    for _ in range(STEPS):
        step()
    return [v.numpy() for v in variables], optimizer


def _reference():
    """Adam by its formula (Kingma and Ba, with epsilon-hat), in float64."""
    variables, loss = _problem()
    m = [np.zeros(v.shape) for v in variables]
    v2 = [np.zeros(v.shape) for v in variables]
    values = [v.numpy().astype(np.float64) for v in variables]
    for t in range(1, STEPS + 1):
        for var, value in zip(variables, values):
            var.assign(value)
        with tf.GradientTape() as tape:
            grads = tape.gradient(loss(), variables)
        alpha = LEARNING_RATE * np.sqrt(1 - BETA_2**t) / (1 - BETA_1**t)
        for i, grad in enumerate(grads):
            grad = grad.numpy().astype(np.float64)
            m[i] = BETA_1 * m[i] + (1 - BETA_1) * grad
            v2[i] = BETA_2 * v2[i] + (1 - BETA_2) * grad**2
            values[i] = values[i] - alpha * m[i] / (np.sqrt(v2[i]) + EPSILON)
    return values


@pytest.mark.parametrize("mode", ["eager", "graph", "xla"])
def test_adam_matches_keras_and_the_formula(mode):
    ours, optimizer = _train(optimizers.Adam(LEARNING_RATE, epsilon=EPSILON), mode)
    keras, _ = _train(tf.keras.optimizers.Adam(LEARNING_RATE, epsilon=EPSILON), mode)
    for a, b, c in zip(ours, keras, _reference()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)  # float32 rounding
        np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-6)
    assert int(optimizer.iterations) == STEPS


def test_adam_is_one_op_per_variable():
    variables, loss = _problem()
    optimizer = optimizers.Adam(LEARNING_RATE)
    optimizer.build(variables)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            value = loss()
        optimizer.apply_gradients(zip(tape.gradient(value, variables), variables))

    graph = step.get_concrete_function().graph.as_graph_def()
    ops = [node.op for node in graph.node]
    ops += [node.op for function in graph.library.function for node in function.node_def]
    assert ops.count("ResourceApplyAdam") == len(variables)
    assert "AssignSubVariableOp" not in ops


def test_a_keras_adam_checkpoint_restores_into_it(tmp_path):
    trained, keras = _train(tf.keras.optimizers.Adam(LEARNING_RATE, epsilon=EPSILON), "eager")
    path = tf.train.Checkpoint(optimizer=keras).write(str(tmp_path / "ckpt"))
    variables, _ = _problem()
    ours = optimizers.Adam(LEARNING_RATE, epsilon=EPSILON)
    ours.build(variables)
    tf.train.Checkpoint(optimizer=ours).read(path).assert_consumed()
    assert int(ours.iterations) == STEPS
    for a, b in zip(ours.variables, keras.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_a_sparse_gradient_takes_keras_update():
    def train(optimizer):
        table = tf.Variable([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]])
        optimizer.build([table])
        for _ in range(STEPS):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.gather(table, [0, 2, 0]) ** 2)
            gradient = tape.gradient(loss, table)
            assert isinstance(gradient, tf.IndexedSlices)
            optimizer.apply_gradients([(gradient, table)])
        return table.numpy()

    ours = train(optimizers.Adam(LEARNING_RATE, epsilon=EPSILON))
    keras = train(tf.keras.optimizers.Adam(LEARNING_RATE, epsilon=EPSILON))
    np.testing.assert_array_equal(ours, keras)
