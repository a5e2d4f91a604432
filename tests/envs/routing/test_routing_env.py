"""The Gymnasium routing environment: registration, step semantics, draws, observation layout."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf
from gymnasium.utils.env_checker import check_env

from batchrl.envs.routing import GYM_IDS, RoutingEnv, split_observ

# NSFNET's candidate paths from 0 to 5 and their links: [0, 2, 5] uses (0, 2) = link 2 and
# (2, 5) = link 11; [0, 3, 4, 5] uses (0, 3) = 1, (3, 4) = 7 and (4, 5) = 20.
PATH_0_LINKS = [2, 11]
PATH_2_LINKS = [1, 7, 20]


@pytest.mark.parametrize("name", ["nsfnet", "geant2"])
def test_registered_and_passes_the_checker(name):
    env = gym.make(GYM_IDS[name])
    assert env.unwrapped.topology.name == name.upper()
    check_env(env.unwrapped, skip_render_check=True)
    links = env.unwrapped.topology.num_links
    assert env.observation_space.shape == (links + 3,)
    assert env.action_space == gym.spaces.Discrete(4)
    env.close()


def test_an_accepted_demand_is_debited_from_its_path():
    env = RoutingEnv("nsfnet")
    env.reset(seed=0)
    capacities = np.full(42, 200.0, np.float32)
    capacities[11] = 64.0  # Exactly the demand: still accepted, down to 0.
    env.set_state(capacities, 64.0, 0, 5)
    observ, reward, terminated, truncated, _ = env.step(0)
    assert (reward, terminated, truncated) == (1.0, False, False)
    expected = capacities.copy()
    expected[PATH_0_LINKS] -= 64.0
    np.testing.assert_array_equal(env.capacities, expected)
    np.testing.assert_array_equal(observ[:42], expected)
    assert env.demand in (8.0, 32.0, 64.0) and env.source != env.destination


def test_a_rejected_demand_ends_the_episode_and_debits_nothing():
    env = RoutingEnv("nsfnet")
    env.reset(seed=0)
    capacities = np.full(42, 200.0, np.float32)
    capacities[11] = 31.0
    before = env.set_state(capacities, 32.0, 0, 5)
    observ, reward, terminated, truncated, _ = env.step(0)
    assert (reward, terminated, truncated) == (0.0, True, False)
    np.testing.assert_array_equal(observ, before)  # The same capacities and demand.
    env.set_state(capacities, 32.0, 0, 5)
    _, reward, terminated, _, _ = env.step(2)
    assert (reward, terminated) == (0.5, False)
    assert (env.capacities[PATH_2_LINKS] == 168.0).all() and env.capacities[11] == 31.0


def test_observation_layout():
    """The observation is the state [L + 3]; each path's links are the topology's."""
    env = RoutingEnv("nsfnet")
    env.reset(seed=0)
    capacities = np.arange(42, dtype=np.float32)
    observ = env.set_state(capacities, 8.0, 0, 5)
    assert observ.shape == (42 + 3,)
    parts = split_observ(observ, 42)
    np.testing.assert_array_equal(parts.capacities, capacities)
    assert (parts.demand, parts.source, parts.destination) == (8.0, 0.0, 5.0)
    assert parts.topology is None  # One topology: no index (a mixed batch's ends with one).
    incidence = env.topology.incidence[0, 5]  # [K, L]
    assert np.flatnonzero(incidence[0]).tolist() == PATH_0_LINKS
    assert np.flatnonzero(incidence[2]).tolist() == PATH_2_LINKS
    batch = np.stack([observ, observ])
    split_parts = tf.function(lambda observ: split_observ(observ, 42))(tf.constant(batch))
    assert split_parts.topology is None
    for part, expected in zip(split_parts[:4], parts[:4], strict=True):
        np.testing.assert_array_equal(part.numpy(), np.stack([expected, expected]))
    with pytest.raises(ValueError, match="size 45 do not fit a routing layout of 74 links"):
        split_observ(observ, 74)


def test_draws_are_uniform_and_seeded():
    env = RoutingEnv("nsfnet")
    env.reset(seed=5)
    draws = np.array([env.reset()[0][-3:] for _ in range(3000)])  # [3000, 3]
    demands, counts = np.unique(draws[:, 0], return_counts=True)
    assert demands.tolist() == [8.0, 32.0, 64.0]
    assert (np.abs(counts - 1000) < 4 * np.sqrt(3000 * 2 / 9)).all()
    assert (draws[:, 1] != draws[:, 2]).all()
    assert len({tuple(pair) for pair in draws[:, 1:]}) == 14 * 13
    first = [env.reset(seed=7)[0] for _ in range(2)]
    np.testing.assert_array_equal(first[0], first[1])


def test_time_limit_through_make():
    env = gym.make(GYM_IDS["nsfnet"], max_episode_steps=3)
    env.reset(seed=0)
    truncated = []
    for _ in range(3):
        env.unwrapped.set_state(np.full(42, 200.0), 8.0, 0, 5)
        _, _, terminated, step_truncated, _ = env.step(0)
        assert not terminated
        truncated.append(step_truncated)
    assert truncated == [False, False, True]
    env.close()


def test_invalid_states_and_actions_are_rejected():
    env = RoutingEnv("nsfnet")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="must differ"):
        env.set_state(np.full(42, 200.0), 8.0, 3, 3)
    with pytest.raises(ValueError, match="valid actions"):
        env.step(4)
