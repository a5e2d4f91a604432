"""bench/graph_aggregation.py's baseline is the network it replaced: the same math."""

import importlib

import numpy as np
import tensorflow as tf

from batchrl.envs.routing import RoutingGraphFeatures
from batchrl.networks.graph import GraphPopulation
from tests.bench.test_report import BENCH


def test_the_baseline_scores_a_mixed_batch_as_the_network_does(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    bench = importlib.import_module("graph_aggregation")
    features = RoutingGraphFeatures(["nsfnet", "waxman-10-s0"])
    network = GraphPopulation(features, 8, 8, 2)
    baseline = GraphPopulation(features, 8, 8, 2)
    baseline.core = bench.batched_core(network.core, features)
    assert isinstance(baseline.core, bench.BatchedCore)
    observ = bench.routing_observations(features, 6)  # Networks 0, 2, 4 on NSFNET.
    params = tf.stack([network.init_params(seed) for seed in range(2)])  # [M, D]
    observ = tf.reshape(observ, [2, 3, -1])
    policy = network.apply(params, observ).numpy()
    np.testing.assert_allclose(baseline.apply(params, observ), policy, rtol=1e-5, atol=1e-6)
    assert np.ptp(policy, axis=-1).min() > 1e-4  # Not a constant policy.
