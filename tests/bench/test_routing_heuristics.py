"""bench/routing_heuristics.evaluate: the first episode of each network, in one XLA call,
as a host loop of single steps reads it from the environment's variables."""

import importlib

import numpy as np
import pytest
import tensorflow as tf

from batchrl.envs.routing import Heuristic, Routing, RoutingGraphFeatures, make_topology_set
from batchrl.networks.graph import GraphPopulation
from batchrl.tools.simulate import simulate
from tests.bench.test_report import BENCH


@pytest.fixture
def heuristics(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("routing_heuristics")


def returns_step_by_step(topology, heuristic: str, episodes: int, seed: int) -> np.ndarray:
    """One `simulate` step per call; a network's return is read when it is first done.

    Compiled with XLA too: a `tf.random.Generator` draws other numbers under XLA than in
    a plain graph, so 'random' agrees with `evaluate` only when both are compiled.
    """
    env = Routing(episodes, seed=seed, topology=topology)
    algo = Heuristic(heuristic, topology, seed=seed)
    step = tf.function(lambda: simulate(env, algo, steps=1), jit_compile=True)
    returns = np.full(episodes, np.nan)
    while np.isnan(returns).any():
        step()
        first = env.done.numpy() & np.isnan(returns)
        returns[first] = env.episode_return.numpy()[first]
    return returns


@pytest.mark.parametrize("heuristic", ["sap", "random"])
def test_evaluate_gives_the_returns_of_a_step_by_step_loop(heuristics, heuristic):
    """A mixed batch (network i on topology i mod 2), so that networks end at different
    steps and go on into second episodes that must not count."""
    topology = make_topology_set(["nsfnet", "waxman-10-s0"])
    returns = heuristics.evaluate(topology, heuristic, 12, seed=5)
    expected = returns_step_by_step(topology, heuristic, 12, seed=5)
    assert returns.shape == (12,) and len(set(returns.tolist())) > 2
    np.testing.assert_array_equal(returns, expected)


def test_an_episode_longer_than_the_bound_is_refused_by_network(heuristics, monkeypatch):
    monkeypatch.setattr(heuristics, "MAX_STEPS", 3)
    with pytest.raises(RuntimeError, match=r"sap on nsfnet: networks \[0, 1, 2, 3\] \(4 in all\)"):
        heuristics.evaluate("nsfnet", "sap", 4, seed=0)


def test_a_router_episode_longer_than_the_bound_is_refused_by_network(heuristics, monkeypatch):
    """routing_es's fixed-set evaluator (the router scores of routing_es, routing_heldout
    and routing_generalization) shares the bound and the check of `evaluate`."""
    routing_es = importlib.import_module("routing_es")
    monkeypatch.setattr(routing_es, "MAX_STEPS", 3)
    monkeypatch.setattr(heuristics, "MAX_STEPS", 3)
    topology = make_topology_set(["nsfnet", "waxman-10-s0"])
    population = GraphPopulation(RoutingGraphFeatures(topology), 4, 4, 1)
    evaluate = routing_es.fixed_set_evaluator(population, topology, 4, seed=0, member_chunk=4)
    expected = r"the router on NSFNET\+waxman-10-s0: networks \[0, 1, 2, 3\] \(4 in all\) "
    with pytest.raises(RuntimeError, match=expected + "did not finish an episode in 3 steps"):
        evaluate(population.init_params(0))


def test_the_router_evaluator_scores_the_same_fixed_set_every_call(heuristics):
    """Every episode finishes (or it would raise), a second call replays the same demand
    streams to the same returns, and other parameters give other returns."""
    routing_es = importlib.import_module("routing_es")
    topology = make_topology_set(["nsfnet", "waxman-10-s0"])
    population = GraphPopulation(RoutingGraphFeatures(topology), 4, 4, 1)
    evaluate = routing_es.fixed_set_evaluator(population, topology, 6, seed=0, member_chunk=6)
    first = evaluate(population.init_params(0))
    np.testing.assert_array_equal(evaluate(population.init_params(0)), first)
    assert first.shape == (6,) and len(set(first.tolist())) > 2
    assert not np.array_equal(evaluate(population.init_params(1)), first)


def test_without_xla_the_evaluators_score_the_same_episodes(heuristics):
    """jit_compile=False (a config with train.jit_compile=false) changes how the fixed set
    is computed, not which episodes it holds: SAP and a router score as under XLA."""
    routing_es = importlib.import_module("routing_es")
    topology = make_topology_set(["nsfnet", "waxman-10-s0"])
    np.testing.assert_array_equal(
        heuristics.evaluate(topology, "sap", 6, seed=5, jit_compile=False),
        heuristics.evaluate(topology, "sap", 6, seed=5),
    )
    population = GraphPopulation(RoutingGraphFeatures(topology), 4, 4, 1)
    theta = population.init_params(0)
    scores = [
        routing_es.fixed_set_evaluator(population, topology, 6, 0, 6, jit_compile=jit)(theta)
        for jit in (False, True)
    ]
    np.testing.assert_allclose(scores[0], scores[1], rtol=1e-6)
