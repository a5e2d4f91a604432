"""The local runner's training call: traced with autograph only when something needs it."""

import numpy as np
import pytest
import tensorflow as tf

from batchrl.config import load_run_config
from batchrl.core import Algorithm
from batchrl.envs import CartPole
from batchrl.runners import LocalTrainer
from batchrl.tools.simulate import needs_autograph


class PythonIf(Algorithm):
    """Acts 0 or 1 by a Python `if` on a tensor, which only autograph turns into a cond."""

    def __init__(self, autograph: bool):
        super().__init__()
        self.autograph = autograph
        self.calls = tf.Variable(0)

    def begin_episodes(self, agent_indices):
        pass

    def perform(self, agent_indices, observ):
        self.calls.assign_add(1)
        if tf.reduce_sum(observ) > 0:
            return tf.ones_like(agent_indices)
        return tf.zeros_like(agent_indices)

    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        pass

    def end_episodes(self, agent_indices):
        pass


def make_trainer(algo, jit_compile):
    overrides = [
        "env.id=CartPole-v1",
        "env.backend=tensorflow",
        "env.num_envs=4",
        "train.steps_per_call=16",
        f"train.jit_compile={str(jit_compile).lower()}",
    ]
    config = load_run_config("debug", overrides)
    env = CartPole(4, seed=0)
    return LocalTrainer(config, algo, env), env


@pytest.mark.parametrize("jit_compile", [False, True])
def test_an_algorithm_that_needs_autograph_gets_it(jit_compile):
    algo = PythonIf(autograph=True)
    trainer, env = make_trainer(algo, jit_compile)
    assert needs_autograph(env, algo)
    steps, stats = trainer.step()
    assert steps == 64 and int(algo.calls) == 16
    assert np.isfinite(float(stats["episodes"]))


def test_without_autograph_python_control_flow_on_tensors_fails():
    # The same algorithm declaring that it needs no autograph: the call is traced
    # without it, and the Python `if` on a tensor is refused while tracing.
    algo = PythonIf(autograph=False)
    trainer, env = make_trainer(algo, jit_compile=False)
    assert not needs_autograph(env, algo)
    with pytest.raises(tf.errors.OperatorNotAllowedInGraphError):
        trainer.step()


def test_an_environment_that_needs_autograph_gets_it():
    class Env(CartPole):
        autograph = True

    algo = PythonIf(autograph=False)
    assert needs_autograph(Env(1), algo)
    assert not needs_autograph(CartPole(1), algo)


def test_names_of_a_traced_function_do_not_depend_on_the_ops_run_before():
    # XLA's persistent cache keys programs by TensorFlow's function names, which carry a
    # process-wide counter; after align_function_names they depend on the tracing alone.
    from batchrl.runners.local import align_function_names

    offsets = []
    for ops_before in (0, 300, 41):  # The first round also pays first-use costs.
        for _ in range(ops_before):
            tf.constant(1.0) + 1.0
        align_function_names()
        name = tf.function(lambda: tf.constant(2.0) * 3.0).get_concrete_function().name
        offsets.append(int(name.decode().rsplit("_", 1)[1]) % 2**17)
    assert offsets[1] == offsets[2]
