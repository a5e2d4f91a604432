"""ES with the graph network learns to route on NSFNET (batchrl.envs.routing)."""

import pytest

from batchrl.algorithms.es import ES
from batchrl.algorithms.es.es import PopulationEvaluator, PopulationPolicy
from batchrl.envs.routing import Routing
from batchrl.tools import load_run_config


def fixed_set_mean(algo, episodes, seed=123):
    """Mean return of theta on a fixed set: the first episode of each of `episodes` networks."""
    env = Routing(episodes, seed=seed, topology="nsfnet")
    policy = PopulationPolicy(algo.network, env.action_space, 1, episodes)
    evaluator = PopulationEvaluator(env, policy, max_steps=1000)
    _, stats = evaluator(algo.strategy.theta[None])
    return float(stats["mean_return"])


def train(overrides, generations, episodes):
    config = load_run_config("nsfnet_es", ["train.jit_compile=false", *overrides])
    batch_env = ES.make_batch_env(config, 0)
    algo = ES(batch_env, config, seed=0)
    trainer = ES.make_trainer(config, algo, batch_env, 0)
    before = fixed_set_mean(algo, episodes)
    for _ in range(generations):
        trainer.step()
    return before, fixed_set_mean(algo, episodes)


def test_es_with_a_small_graph_network_improves_quickly():
    """A small graph network (H = 8, R = 8, T = 2), 16 pairs, Adam 0.02, 6 generations.

    Measured (seed 0, 100 fixed episodes, graph mode): 13.25 before, 19.03 after with the
    preset's common random numbers (17.46 without them, in an earlier session); with Adam
    0.005 the gain was under 3. SAP scores about 26.6.
    """
    small = [
        "network.link_state_size=8",
        "network.readout_units=8",
        "network.message_passing_steps=2",
        "es.population=16",
        "es.learning_rate=0.02",
    ]
    before, after = train(small, generations=6, episodes=100)
    assert after > before + 3.0, (before, after)


@pytest.mark.slow
def test_nsfnet_es_passes_20_within_30_generations():
    """The nsfnet_es preset (H = 25, R = 20, 128 pairs), 30 generations, 300 episodes."""
    before, after = train([], generations=30, episodes=300)
    assert before < 12.0 and after > 20.0, (before, after)
