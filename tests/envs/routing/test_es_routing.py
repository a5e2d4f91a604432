"""ES with the graph network learns to route on NSFNET (batchrl.envs.routing)."""

import pytest

from batchrl.algorithms.es import ES
from batchrl.algorithms.es.generation import PopulationEvaluator, PopulationPolicy
from batchrl.config import load_run_config
from batchrl.envs.routing import Routing
from tests.learning import assert_k_of_n


def fixed_set_mean(algo, episodes, seed=123, topology="nsfnet", streams=None):
    """Mean return of theta on a fixed set: the first episode of each of `episodes`
    networks of `topology` (a name, or a list for a mixed batch, whose network i routes
    on the topology its stream, `streams[i]`, picks)."""
    env = Routing(episodes, seed=seed, topology=topology)
    if streams is not None:
        env.restart_streams(streams=streams)
    policy = PopulationPolicy(algo.network, env.action_space, 1, episodes)
    evaluator = PopulationEvaluator(env, policy, max_steps=1000)
    _, stats = evaluator(algo.strategy.theta[None])
    return float(stats["mean_return"]), env


def train(overrides, generations, episodes, seed=0):
    config = load_run_config("nsfnet_es", ["train.jit_compile=false", *overrides])
    batch_env = ES.make_batch_env(config, seed)
    algo = ES(batch_env, config, seed=seed)
    trainer = ES.make_trainer(config, algo, batch_env, seed)
    before, _ = fixed_set_mean(algo, episodes)
    for _ in range(generations):
        trainer.step()
    return before, fixed_set_mean(algo, episodes)[0]


@pytest.mark.slow  # About 7 to 11 s: out of the default suite for its budget.
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


# About 1.5 minutes a seed on one idle core; 3 to 4.5 in the slow stage, where on an AMD EPYC
# of family 25 (2026-12-02) it took 650 s in all: outside CI, for its time limit.
@pytest.mark.long
def test_nsfnet_es_passes_20_within_15_generations():
    """The nsfnet_es preset (H = 25, R = 20, 128 pairs) passes 20 in 15 generations in at
    least 2 of seeds 0 to 2 (the mean return on 300 fixed episodes).

    Measured on 2026-11-27 (AMD EPYC, one core, code of d460374), the fixed-set mean after
    0, 5, ..., 30 generations:
      seed 0: 8.34, 17.63, 19.36, 20.87, 21.17, 21.83, 23.34
      seed 1: 10.19, 16.09, 21.18, 21.47, 22.51, 22.86, 24.23
      seed 2: 10.38, 17.01, 19.87, 21.53, 20.40, 22.38, 23.41
    so 3 of 3 pass 20 at 15 generations (the lowest by 0.87). This test ran 30 generations
    until then, the longest of CI's slow stage (794 s there).
    """
    results = {seed: train([], generations=15, episodes=300, seed=seed) for seed in range(3)}
    assert all(before < 12.0 for before, _ in results.values()), results
    assert_k_of_n({seed: after for seed, (_, after) in results.items()}, 20.0, 2)
