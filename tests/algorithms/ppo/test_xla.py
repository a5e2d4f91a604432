"""PPO on an environment in TensorFlow ops gives the same result with and without XLA.

TensorFlow's XLA kernels draw different random numbers than its graph kernels for the same
seed (tf.random.Generator and the stateless ops alike), so the comparison fixes what is
random: both runs collect the same experience in graph mode, and then one update runs
compiled and one not, with a single minibatch so that the shuffle cannot matter. The
rollout of the deterministic policy is compared the same way.
"""

import numpy as np
import pytest
import tensorflow as tf

from batchrl import envs
from batchrl.algorithms import PPO
from batchrl.config import load_run_config
from batchrl.tools.simulate import simulate
from batchrl.training import PolicyEvaluator

# Float32 sums in a different order: XLA fuses and reorders the reductions. Adam divides by
# the root of the second moment, which magnifies that noise for variables whose gradient is
# near zero: weights agree within a tenth of one step of the learning rate (1e-3).
RTOL, ATOL = 1e-4, 1e-4


def _make(rollout_length, minibatches=1, jit_update=True, objective="clip", network="feedforward"):
    tf.keras.utils.set_random_seed(0)  # The same initial weights in every call.
    config = load_run_config(
        "pendulum_tf",
        [
            "env.num_envs=4",
            f"ppo.rollout_length={rollout_length}",
            f"ppo.minibatches={minibatches}",
            "ppo.epochs=3",
            "network.policy_layers=[32, 32]",
            "network.value_layers=[32, 32]",
            f"ppo.jit_update={str(jit_update).lower()}",
            f"ppo.objective={objective}",
            f"network.name={network}",
            # gSDE (the preset's) explores with a feed-forward policy's features only.
            f"ppo.gsde={str(network == 'feedforward').lower()}",
        ],
    )
    env = envs.make("Pendulum-v1", 4, seed=3)
    algo = PPO(env, config, seed=0)
    return env, algo


def _weights(algo):
    return [variable.numpy() for variable in algo.trainable_variables]


def _collect_and_update(jit_compile, **kwargs):
    """Initial weights, weights after one update, and the KL penalty coefficient."""
    env, algo = _make(rollout_length=32, **kwargs)
    # 31 steps fill all but the last row of the rollout, without an update.
    tf.function(lambda: simulate(env, algo, steps=31))()
    before = _weights(algo)
    batch = {key: value[:31] for key, value in algo.rollout.read().items()}  # [31, 4, ...]
    if algo.recurrent:  # The states the rollout started from.
        batch["state"] = algo.initial_state(4)
    tf.function(lambda: algo.learn(batch), jit_compile=jit_compile)()
    return before, _weights(algo), algo.penalty.numpy()


@pytest.mark.parametrize(
    "objective, network",
    [
        ("clip", "feedforward"),
        ("kl_penalty", "feedforward"),
        ("clip", "gru"),  # About 9 s: XLA compiles the GRU's update.
    ],
)
@pytest.mark.slow  # Out of the default suite: 31 s on 2 busy cores (2026-12-06).
def test_compiled_update_matches_graph_update(objective, network):
    results = [
        _collect_and_update(jit, jit_update=False, objective=objective, network=network)
        for jit in (False, True)
    ]
    (before_graph, graph, penalty_graph), (before_xla, xla, penalty_xla) = results
    for a, b in zip(before_graph, before_xla, strict=True):
        np.testing.assert_array_equal(a, b)  # The same start.
    changed = [not np.allclose(a, b) for a, b in zip(before_graph, graph, strict=True)]
    assert all(changed)  # The update moved every variable.
    for a, b in zip(graph, xla, strict=True):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(penalty_graph, penalty_xla, rtol=RTOL)


def test_compiled_rollout_of_the_deterministic_policy_matches_graph_rollout():
    returns = []
    for jit in (False, True):
        env, algo = _make(rollout_length=32)
        tf.function(env.reset)()  # The same initial states: reset outside XLA.
        evaluator = PolicyEvaluator(algo, 4)
        call = tf.function(
            lambda env=env, e=evaluator: simulate(env, e, steps=150), jit_compile=jit
        )
        call()
        returns.append((env.episode_return.numpy(), env.observ.numpy()))
    np.testing.assert_allclose(returns[0][0], returns[1][0], rtol=RTOL, atol=1e-3)
    np.testing.assert_allclose(returns[0][1], returns[1][1], rtol=RTOL, atol=1e-4)


@pytest.mark.parametrize(
    "outer_jit, network", [(False, "feedforward"), (True, "feedforward"), (False, "gru")]
)
@pytest.mark.slow  # Out of the default suite: 35 s on 2 busy cores (2026-12-06).
def test_xla_minibatch_steps_match_graph_minibatch_steps(outer_jit, network):
    # Four minibatches, so a wrong slice of the shuffled rows would show. Each pair of runs
    # draws the same shuffle: both in graph mode or both under XLA. Inside a call that XLA
    # compiles, the nested jit_compile function gathered wrong rows while PPO sliced
    # minibatches of a size computed in the graph (XLA pads such slices); with static
    # slices the nested function is inlined and agrees.
    (before_a, graph, _), (before_b, jit, _) = [
        _collect_and_update(outer_jit, minibatches=4, jit_update=jit_update, network=network)
        for jit_update in (False, True)
    ]
    for a, b in zip(before_a, before_b, strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(graph, jit, strict=True):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)
