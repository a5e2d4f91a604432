"""The baseline routing policies: golden actions, simulate, and SAP beside REFERENCE.md."""

import numpy as np
import pytest
import tensorflow as tf

from batchrl.envs.routing import HEURISTICS, Heuristic, Routing, load_topology
from batchrl.envs.routing import heuristics as h
from batchrl.envs.routing.observation import make_observ
from batchrl.tools.simulate import simulate

NSFNET = load_topology("nsfnet")
MASKS = h.path_masks(NSFNET)
# The candidate paths from 0 to 5 and the NSFNET links they use, by link index:
#   path 0  [0, 2, 5]           (0,2)=2  (2,5)=11
#   path 1  [0, 1, 2, 5]        (0,1)=0  (1,2)=4  (2,5)=11
#   path 2  [0, 3, 4, 5]        (0,3)=1  (3,4)=7  (4,5)=20
#   path 3  [0, 1, 7, 6, 4, 5]  (0,1)=0  (1,7)=5  (7,6)=13  (6,4)=25  (4,5)=20
LINKS = {(0, 2): 2, (2, 5): 11, (0, 1): 0, (0, 3): 1, (3, 4): 7, (4, 5): 20, (6, 4): 25}
# REFERENCE.md, section 5: SAP over 1000 episodes, standard error about 0.3.
REFERENCE_SAP = {"nsfnet": 26.6, "geant2": 22.2}


def observ_0_to_5(demand, **capacities):
    """An NSFNET observation [1, D] of a demand from 0 to 5; links at 200 unless named."""
    values = np.full(42, 200.0, np.float32)
    for name, value in capacities.items():
        values[LINKS[tuple(int(node) for node in name[1:].split("_"))]] = value
    return make_observ(values, demand, 0, 5)[None]


# Every path feasible; (2,5) full: paths 0 and 1 infeasible, path 2's bottleneck 40 - 32 = 8,
# path 3's 100 - 32 = 68; only path 3 feasible; none feasible.
OBSERV = np.concatenate(
    [
        observ_0_to_5(32.0),
        observ_0_to_5(32.0, l2_5=16.0, l3_4=40.0, l6_4=100.0),
        observ_0_to_5(64.0, l2_5=16.0, l3_4=40.0, l6_4=100.0),
        observ_0_to_5(8.0, l0_1=0.0, l0_2=0.0, l0_3=0.0),
    ]
)  # [4, 45]


@pytest.mark.parametrize("graph", [False, True])
def test_golden_actions(graph):
    wrap = tf.function if graph else lambda fn: fn
    feasible = wrap(h.feasible_paths)(OBSERV, MASKS).numpy()
    assert feasible.tolist() == [
        [True] * 4,
        [False, False, True, True],
        [False] * 3 + [True],
        [False] * 4,
    ]
    assert wrap(h.shortest_available_path)(OBSERV, MASKS).numpy().tolist() == [0, 2, 3, 0]
    assert wrap(h.widest_path)(OBSERV, MASKS).numpy().tolist() == [0, 3, 3, 0]
    assert wrap(h.always_shortest)(OBSERV, MASKS).numpy().tolist() == [0, 0, 0, 0]
    load_balancing = wrap(h.load_balancing)
    for noise, expected in [(0.0, [0, 2, 3, 0]), (0.49, [1, 2, 3, 0]), (0.5, [2, 3, 3, 0])]:
        actions = load_balancing(OBSERV, tf.fill([4], noise), MASKS).numpy()
        assert actions.tolist() == expected, noise
    assert load_balancing(OBSERV, tf.constant([0.999] * 4), MASKS).numpy().tolist() == [3, 3, 3, 0]
    noise = tf.constant([0.0, 0.26, 0.74, 0.9999999])
    assert wrap(h.uniform_random)(OBSERV, noise, MASKS).numpy().tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("heuristic", list(HEURISTICS))
def test_heuristics_run_in_simulate(heuristic):
    env = Routing(8, seed=0)
    algo = Heuristic(heuristic, "nsfnet", seed=1)
    result = tf.function(lambda: simulate(env, algo, steps=100))()
    assert result["episodes"].numpy() > 0
    assert 0 <= env.action.numpy().min() and env.action.numpy().max() < 4
    if heuristic in ("sap", "shortest", "widest"):
        expected = HEURISTICS[heuristic](env.observ, None, MASKS).numpy()
        np.testing.assert_array_equal(algo.perform(tf.range(8), env.observ).numpy(), expected)


def test_random_heuristics_cover_the_candidates_and_restore_their_stream(tmp_path):
    algo = Heuristic("random", "nsfnet", seed=3)
    observ = tf.constant(np.repeat(OBSERV[:1], 400, 0))
    counts = np.bincount(algo.perform(tf.range(400), observ).numpy(), minlength=4)
    assert (counts > 60).all()
    path = tf.train.Checkpoint(algo=algo).save(tmp_path / "ckpt")
    expected = algo.perform(tf.range(400), observ).numpy()
    tf.train.Checkpoint(algo=algo).restore(path).assert_consumed()
    np.testing.assert_array_equal(algo.perform(tf.range(400), observ).numpy(), expected)
    with pytest.raises(ValueError, match="valid choices"):
        Heuristic("ospf")


@pytest.mark.parametrize("name", ["nsfnet", "geant2"])
def test_sap_matches_the_reference(name):
    """SAP's mean first-episode return over 500 networks, beside REFERENCE.md's figure.

    Within three standard errors of the difference (ours about 0.2 here, the reference's
    about 0.3); the whole batch steps in one XLA call until every network has ended.
    """
    episodes = 500
    env = Routing(episodes, seed=0, topology=name)

    @tf.function(jit_compile=True)
    def first_returns():
        env.reset()

        def body(running, returns):
            _, reward, terminated, _ = env.step(
                h.shortest_available_path(env.observ, env.path_masks)
            )
            return running & ~terminated, returns + tf.where(running, reward, 0.0)

        running = tf.ones([episodes], tf.bool)
        _, returns = tf.while_loop(
            lambda running, _: tf.reduce_any(running), body, (running, tf.zeros([episodes]))
        )
        return returns

    returns = first_returns().numpy()
    error = returns.std(ddof=1) / np.sqrt(episodes)
    assert abs(returns.mean() - REFERENCE_SAP[name]) < 3 * np.hypot(error, 0.3)
