"""Recurrent PPO: it remembers what a feed-forward policy cannot, trains, evaluates, exports."""

import subprocess
import sys
import textwrap

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from batchrl.algorithms import PPO
from batchrl.config import Config, load_run_config
from batchrl.runners import train
from batchrl.tools.in_graph_env import InGraphEnv
from batchrl.tools.simulate import simulate
from batchrl.training import PolicyEvaluator

LENGTH = 4


class Cue(InGraphEnv):
    """Shows a cue of -1 or +1 in the first step only; the last action must repeat it.

    Observation [cue, is first step]; action 0 or 1; reward 1 at step LENGTH when the
    action is 1 for cue +1 and 0 for cue -1. A policy without memory scores 0.5 at best.
    """

    def __init__(self, batch_size, seed=0):
        super().__init__(
            batch_size,
            gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
            gym.spaces.Discrete(2),
        )
        self.seed = seed
        self.cue = tf.Variable(tf.zeros([batch_size]), trainable=False)
        self.time = tf.Variable(tf.zeros([batch_size], tf.int32), trainable=False)
        self.resets = tf.Variable(0, trainable=False)

    def _step(self, action):
        self.time.assign_add(tf.ones_like(self.time))
        last = self.time >= LENGTH
        correct = tf.equal(action, tf.cast(self.cue > 0, tf.int32))
        reward = tf.where(last & correct, 1.0, 0.0)
        observ = tf.zeros([len(self), 2])
        return observ, reward, last, tf.zeros_like(last)

    def _reset(self, indices):
        seed = tf.stack([tf.constant(self.seed), self.resets])
        self.resets.assign_add(1)
        coin = tf.random.stateless_uniform([tf.size(indices)], seed) < 0.5
        cue = tf.where(coin, 1.0, -1.0)
        rows = indices[:, None]
        self.cue.scatter_nd_update(rows, cue)
        self.time.scatter_nd_update(rows, tf.zeros_like(indices))
        return tf.stack([cue, tf.ones_like(cue)], 1)


def train_on_cue(network, iterations=40):
    tf.keras.utils.set_random_seed(0)
    config = load_run_config(
        "default",
        [
            f"network.name={network}",
            "network.recurrent_units=16",
            "network.policy_layers=[16]",
            "network.value_layers=[16]",
            "ppo.rollout_length=16",
            "ppo.minibatches=4",
            "ppo.epochs=4",
            "ppo.learning_rate=3e-3",
            "ppo.normalize_reward=false",
            "ppo.discount=1.0",
            "ppo.entropy_coef=0.01",
        ],
    )
    env = Cue(32)
    algo = PPO(env, config, seed=0)
    call = tf.function(lambda: simulate(env, algo, steps=16))
    returns = [float(call()["mean_return"]) for _ in range(iterations)]
    evaluator = PolicyEvaluator(algo, 32)
    evaluation = tf.function(lambda: simulate(env, evaluator, reset=True, steps=LENGTH))
    return returns, float(evaluation()["mean_return"])


@pytest.mark.parametrize("network", ["gru", "lstm"])
def test_recurrent_policy_remembers_the_cue(network):
    returns, evaluation = train_on_cue(network)
    assert np.mean(returns[:3]) < 0.7
    assert evaluation >= 0.95, (returns[-5:], evaluation)


def test_feedforward_policy_cannot_remember_the_cue():
    _, evaluation = train_on_cue("feedforward")
    assert evaluation <= 0.75


def test_recurrent_debug_run_evaluates_and_exports_a_stateful_policy(tmp_path):
    config = load_run_config(
        "debug",
        ["network.name=gru", "env.eval_envs=3", "train.total_steps=256"],
    )
    result = train(config, tmp_path, progress=lambda *_, **__: None)
    assert result["step"] == 256 and np.isfinite(result["eval_return"])
    code = textwrap.dedent(
        f"""
        import numpy as np, tensorflow as tf
        policy = tf.saved_model.load({str(tmp_path / "policy")!r})
        state = policy.initial_state(2)
        observ = tf.constant([[1.0, 0.0, 0.5], [0.0, 1.0, -0.5]])
        first = policy(observ, state)
        second = policy(observ, first["state"])
        assert first["action"].shape == (2, 1) and first["state"].shape == state.shape
        assert not np.allclose(first["state"], second["state"])  # The state carries over.
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_recurrent_policy_with_episode_updates_is_refused():
    with pytest.raises(ValueError, match="needs ppo.update_mode='steps'"):
        load_run_config("debug", ["network.name=lstm", "ppo.update_mode=episodes"])
    config = load_run_config("debug", ["network.name=lstm"])
    config = Config(
        {**config.to_dict(), "ppo": {**config.ppo.to_dict(), "update_mode": "episodes"}}
    )
    with pytest.raises(ValueError, match="needs ppo.update_mode='steps'"):
        PPO(Cue(2), config)
