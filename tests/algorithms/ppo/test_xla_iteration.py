"""The whole PPO iteration as one XLA program: `LocalTrainer` with `train.jit_compile`.

Both runs here are compiled, so they draw the same random numbers (XLA's kernels draw
other numbers than graph mode's; test_xla.py compares the update with graph mode).
"""

import numpy as np
import tensorflow as tf

from batchrl import envs
from batchrl.algorithms import PPO
from batchrl.config import load_run_config
from batchrl.runners import LocalTrainer

ROLLOUT, ENVS = 8, 4


def _trainer(iterations):
    tf.keras.utils.set_random_seed(0)
    config = load_run_config(
        "pendulum_tf",
        [
            f"env.num_envs={ENVS}",
            f"ppo.rollout_length={ROLLOUT}",
            "ppo.epochs=2",
            "ppo.minibatches=4",
            "network.policy_layers=[16]",
            "network.value_layers=[16]",
            "train.jit_compile=true",
            f"train.steps_per_call={iterations * ROLLOUT}",
        ],
    )
    env = envs.make("Pendulum-v1", ENVS, seed=3)
    algo = PPO(env, config, seed=0)
    return LocalTrainer(config, algo, env), algo


def test_iterations_per_call_equal_single_calls_without_retracing():
    double, double_algo = _trainer(iterations=2)
    steps, double_stats = double.step()
    assert steps == 2 * ROLLOUT * ENVS
    single, single_algo = _trainer(iterations=1)
    single_stats = [single.step()[1] for _ in range(2)]
    before = [v.numpy() for v in single_algo.trainable_variables]
    for a, b in zip(double_algo.trainable_variables, single_algo.trainable_variables, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    for algo in (double_algo, single_algo):
        assert algo.observ_normalizer.count.numpy() == 2 * ROLLOUT * ENVS
    np.testing.assert_allclose(
        double_algo.observ_normalizer.mean.numpy(), single_algo.observ_normalizer.mean.numpy()
    )
    # The update's summaries come back as tensors: those of the latest update.
    for name in ("ppo/kl", "ppo/policy_loss", "ppo/value_loss", "ppo/grad_norm"):
        np.testing.assert_allclose(
            double_stats[name].numpy(), single_stats[1][name].numpy(), rtol=1e-4, atol=1e-7
        )
    assert single_stats[0]["ppo/grad_norm"].numpy() > 0
    assert single_stats[0]["ppo/kl"].numpy() != single_stats[1]["ppo/kl"].numpy()
    # More calls run the same XLA program: no retracing, and the weights move on.
    single.step()
    single.step()
    assert single._call.experimental_get_tracing_count() == 1
    after = [v.numpy() for v in single_algo.trainable_variables]
    assert all(not np.allclose(a, b) for a, b in zip(before, after, strict=True))
