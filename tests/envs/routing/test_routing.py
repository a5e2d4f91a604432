"""The in-graph routing environment: step-for-step parity with RoutingEnv, XLA, streams, state."""

import numpy as np
import pytest
import tensorflow as tf

from batchrl import envs
from batchrl.envs.routing import Routing, RoutingEnv, load_topology
from batchrl.envs.routing import path_masks as path_masks_module
from batchrl.envs.routing.heuristics import shortest_available_path
from batchrl.envs.routing.observation import make_observ, split_observ

TOPOLOGIES = {name: load_topology(name) for name in ("nsfnet", "geant2")}


def read_state(env):
    """Capacities [B, L], demand, source and destination [B] of the TF env, in NumPy."""
    return [x.numpy() for x in (env.capacities, env.demand, env.source, env.destination)]


def copy_state(state, gym_env, index):
    """Puts network `index` of `read_state` into the Gymnasium env; returns its observation."""
    return gym_env.set_state(*(part[index] for part in state))


@pytest.mark.parametrize(
    "name, jit, table",
    [("nsfnet", False, True), ("geant2", False, True), ("geant2", True, True)]
    + [("nsfnet", True, False), ("geant2", False, False)],
)
def test_parity_with_the_gymnasium_env(name, jit, table, monkeypatch):
    """Drives B networks and B Gymnasium envs with the same demands and actions, with the
    paths' masks from the table and, past `MASK_TABLE_LIMIT` (set to 0), from the links.

    The demand streams differ, so after every step the TF env's new demand (or, after a
    reset, its new episode) is copied into the Gymnasium env, whose observation of the
    copied state must then equal the TF env's. Actions are mostly SAP's, so that episodes
    run long and links fill up, and else uniform.
    """
    batch, steps = 8, 120
    topology = TOPOLOGIES[name]
    links = topology.num_links
    if not table:
        monkeypatch.setattr(path_masks_module, "MASK_TABLE_LIMIT", 0)
    env = Routing(batch, seed=1, topology=topology)
    assert (env.path_masks.table is not None) == table
    step = tf.function(env.step, jit_compile=jit)
    reset = tf.function(env.reset, jit_compile=jit)
    gym_envs = [RoutingEnv(topology) for _ in range(batch)]
    sap = tf.function(lambda observ: shortest_available_path(observ, env.path_masks))
    observ = reset().numpy()
    state = read_state(env)
    for i, gym_env in enumerate(gym_envs):
        gym_observ, _ = gym_env.reset(seed=i)
        np.testing.assert_array_equal(gym_observ[:links], observ[i, :links])  # Full links.
        np.testing.assert_array_equal(copy_state(state, gym_env, i), observ[i])
    rng = np.random.default_rng(0)
    rewards, terminations = [], 0
    for _ in range(steps):
        action = sap(observ).numpy()
        explore = rng.random(batch) < 0.1
        action[explore] = rng.integers(0, 4, explore.sum())
        observ, reward, terminated, truncated = [x.numpy() for x in step(action)]
        assert not truncated.any()
        state = read_state(env)
        for i, gym_env in enumerate(gym_envs):
            gym_observ, gym_reward, gym_terminated, gym_truncated, _ = gym_env.step(action[i])
            assert (reward[i], terminated[i], truncated[i]) == (
                gym_reward,
                gym_terminated,
                gym_truncated,
            )
            if terminated[i]:  # The same rejected demand on the same capacities.
                np.testing.assert_array_equal(gym_observ, observ[i])
            else:  # The same capacities; then the same demand.
                np.testing.assert_array_equal(gym_observ[:links], observ[i, :links])
                np.testing.assert_array_equal(copy_state(state, gym_env, i), observ[i])
        rewards.extend(reward[~terminated])
        done = np.flatnonzero(terminated)
        terminations += len(done)
        if len(done):
            observ[done] = reset(tf.constant(done, tf.int32)).numpy()
            state = read_state(env)
            for i in done:
                gym_observ, _ = gym_envs[i].reset()
                np.testing.assert_array_equal(gym_observ[:links], observ[i, :links])
                np.testing.assert_array_equal(copy_state(state, gym_envs[i], i), observ[i])
    assert terminations >= 10
    assert set(rewards) == {0.125, 0.5, 1.0}
    assert min(env.capacities.numpy().min(), 0.0) == 0.0


@pytest.mark.parametrize("table", [True, False])
def test_path_masks_are_the_topologys_incidence_for_every_pair_and_path(table, monkeypatch):
    """`PathMasks` from the table and from the links give `Topology.incidence` [N, N, K, L],
    for whole pairs and one path at a time, and `marks` scales them by the demand."""
    if not table:
        monkeypatch.setattr(path_masks_module, "MASK_TABLE_LIMIT", 0)
    topology = TOPOLOGIES["geant2"]
    masks = path_masks_module.PathMasks(topology)
    assert (masks.table is not None) == table
    n = topology.num_nodes
    pairs = np.array([(0, s, t) for s in range(n) for t in range(n) if s != t], np.int32)
    expected = topology.incidence[pairs[:, 1], pairs[:, 2]]  # [P, K, L]
    np.testing.assert_array_equal(masks(pairs).numpy(), expected)
    one = np.concatenate([pairs, np.full([len(pairs), 1], 3, np.int32)], 1)
    np.testing.assert_array_equal(masks(one).numpy(), expected[:, 3])
    parts = split_observ(np.array([make_observ(np.zeros(74), 32.0, 5, 2)]), 74)
    marks = masks.marks(parts).numpy()[0]
    np.testing.assert_array_equal(marks, 32.0 * topology.incidence[5, 2])
    assert set(np.unique(marks)) == {0.0, 32.0}


def test_streams_depend_neither_on_batch_size_nor_on_the_others():
    small, large = Routing(2, seed=3), Routing(5, seed=3)
    np.testing.assert_array_equal(small.reset().numpy(), large.reset().numpy()[:2])
    for t in range(6):
        small_observ = small.step([0, t % 4])[0]
        large_observ = large.step([0, t % 4, 1, 2, 3])[0]
        np.testing.assert_array_equal(small_observ.numpy(), large_observ.numpy()[:2])
    other = Routing(2, seed=4)
    assert not np.array_equal(other.reset().numpy(), small.reset().numpy())


def test_draws_are_uniform():
    env = Routing(500, seed=0)
    reset = tf.function(env.reset)
    draws = np.concatenate([reset().numpy()[:, -3:] for _ in range(6)])  # [3000, 3]
    demands, counts = np.unique(draws[:, 0], return_counts=True)
    assert demands.tolist() == [8.0, 32.0, 64.0]
    assert (np.abs(counts - 1000) < 4 * np.sqrt(3000 * 2 / 9)).all()
    assert (draws[:, 1] != draws[:, 2]).all()
    assert len({tuple(pair) for pair in draws[:, 1:]}) == 14 * 13


def lowbias32(x):
    """Wellons' lowbias32 in NumPy uint32, written from its published steps."""
    x = np.asarray(x, np.uint32)
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x *= np.uint32(0x846CA68B)
    return x ^ (x >> np.uint32(16))


@pytest.mark.parametrize("jit", [False, True])
def test_demands_are_the_stream_hash_in_eager_graph_and_xla(jit):
    """Network i's d-th draw is lowbias32(lowbias32(lowbias32(seed + 0x9E3779B9) ^ stream)
    ^ d) mod 3 N (N - 1), coding demand x mod 3 and the pair x div 3, in every mode."""
    env = Routing(3, seed=7)
    env.restart_streams(streams=[5, 0, 5])
    reset = tf.function(env.reset, jit_compile=True) if jit else env.reset
    with np.errstate(over="ignore"):
        base = lowbias32(np.uint32(7) + np.uint32(0x9E3779B9))
        for d in range(3):
            observ = reset().numpy()
            bits = lowbias32(lowbias32(base ^ np.uint32([5, 0, 5])) ^ np.uint32(d))
            code = bits.astype(np.int64) % (3 * 14 * 13)
            source, rest = divmod(code // 3, 13)
            destination = rest + (rest >= source)
            expected = np.stack([np.array([8.0, 32.0, 64.0])[code % 3], source, destination], 1)
            np.testing.assert_array_equal(observ[:, -3:], expected)
    np.testing.assert_array_equal(observ[0], observ[2])  # One stream, one demand.


def test_reset_of_a_subset_changes_only_those_rows():
    env = Routing(4, seed=0)
    env.reset()
    for _ in range(3):
        env.step([0, 1, 2, 3])
    before = {
        name: getattr(env, name).numpy()
        for name in ("capacities", "demand", "source", "observ", "elapsed", "draws")
    }
    observ = env.reset(tf.constant([1, 2]))
    np.testing.assert_array_equal(env.observ.numpy()[[1, 2]], observ.numpy())
    assert (env.capacities.numpy()[[1, 2]] == 200.0).all()
    assert env.elapsed.numpy().tolist() == [3, 0, 0, 3]
    assert env.draws.numpy().tolist() == [4, 5, 5, 4]
    for name, value in before.items():
        np.testing.assert_array_equal(getattr(env, name).numpy()[[0, 3]], value[[0, 3]])
    env.reset(tf.zeros([0], tf.int32))
    assert env.draws.numpy().tolist() == [4, 5, 5, 4]


@pytest.mark.parametrize("jit", [False, True])
def test_reset_where_is_reset_of_the_masks_indices(jit):
    """simulate resets by mask, with selects over the whole batch: the same as by indices."""
    by_indices, by_mask = (Routing(6, seed=5, topology=["nsfnet", "geant2"]) for _ in range(2))
    mask = tf.constant([True, False, True, True, False, False])
    reset_where = tf.function(by_mask.reset_where, jit_compile=True) if jit else by_mask.reset_where
    for env in (by_indices, by_mask):
        env.reset()
        for action in ([0, 1, 2, 3, 0, 1], [3, 3, 2, 1, 0, 0]):
            env.step(action)
    by_indices.reset(tf.constant([0, 2, 3]))
    reset_where(mask)
    names = ["observ", "reward", "terminated", "truncated", "done", "episode_return"]
    names += ["episode_length", "capacities", "topology_index", "demand", "source"]
    names += ["destination", "elapsed", "draws"]
    for name in names:
        np.testing.assert_array_equal(
            getattr(by_mask, name).numpy(), getattr(by_indices, name).numpy(), err_msg=name
        )
    assert by_mask.elapsed.numpy().tolist() == [0, 2, 0, 0, 2, 2]
    assert by_mask.draws.numpy().tolist() == [4, 3, 4, 4, 3, 3]


def test_time_limit():
    env = Routing(2, max_episode_steps=2)
    env.reset()
    truncated = []
    for _ in range(3):
        env.set_state(tf.fill([2, 42], 200.0), [8.0, 8.0], [0, 0], [5, 5])
        truncated.append(env.step([0, 0])[3].numpy().tolist())
    assert truncated == [[False, False], [True, True], [True, True]]
    assert not Routing(1).max_episode_steps


def test_set_state_of_some_networks():
    env = Routing(3)
    env.reset()
    gym_env = RoutingEnv("nsfnet")
    capacities = np.full([1, 42], 100.0, np.float32)
    env.set_state(capacities, [32.0], [0], [5], indices=[2])
    gym_env.reset(seed=0)
    expected = gym_env.set_state(capacities[0], 32.0, 0, 5)
    np.testing.assert_array_equal(env.observ.numpy()[2], expected)
    _, reward, terminated, _ = env.step([0, 0, 0])
    assert reward.numpy()[2] == 0.5 and not terminated.numpy()[2]


def test_checkpoint_restores_the_networks(tmp_path):
    env = Routing(3, seed=2)
    env.reset()
    env.step([0, 1, 2])
    path = tf.train.Checkpoint(env=env).save(tmp_path / "ckpt")
    expected = [x.numpy() for x in env.step([3, 2, 1])]
    env.reset()
    tf.train.Checkpoint(env=env).restore(path).assert_consumed()
    actual = [x.numpy() for x in env.step([3, 2, 1])]
    for want, got in zip(expected, actual, strict=True):
        np.testing.assert_array_equal(got, want)


def test_resolved_by_entry_point_and_geant2_spaces():
    env = envs.make("batchrl.envs.routing:Routing", 2, seed=1, max_episode_steps=5)
    assert isinstance(env, Routing) and env.max_episode_steps == 5
    geant2 = Routing(1, topology="geant2")
    assert geant2.observation_space == RoutingEnv("geant2").observation_space
    assert geant2.observation_space.shape == (74 + 3,)
    assert geant2.observation_space.contains(geant2.reset().numpy()[0])


def demands_of_first_episodes(env, actions, steps):
    """(demand, source, destination) [steps, B] seen while acting with `actions` [B]."""
    env.reset()
    seen = []
    for _ in range(steps):
        seen.append(np.stack([env.demand.numpy(), env.source.numpy(), env.destination.numpy()]))
        env.step(actions)
    return np.stack(seen)


def test_networks_on_one_stream_see_the_same_demands_whatever_they_do():
    env = Routing(4, seed=3)
    env.restart_streams(streams=[0, 1, 0, 1])
    # Networks 0 and 2 share stream 0, 1 and 3 stream 1; different paths, and few enough
    # steps that no episode ends (3 steps of at most 64 on a link of 200).
    seen = demands_of_first_episodes(env, [0, 1, 3, 2], steps=3)
    np.testing.assert_array_equal(seen[:, :, 0], seen[:, :, 2])
    np.testing.assert_array_equal(seen[:, :, 1], seen[:, :, 3])
    assert (seen[:, :, 0] != seen[:, :, 1]).any()
    env.restart_streams()
    np.testing.assert_array_equal(demands_of_first_episodes(env, [3, 2, 0, 1], steps=3), seen)
    env.restart_streams(seed=4)
    assert (demands_of_first_episodes(env, [0, 1, 3, 2], steps=3) != seen).any()


def test_restart_streams_refuses_bad_input():
    env = Routing(4)
    with pytest.raises(ValueError, match=r"one stream per network \[4\]"):
        env.restart_streams(streams=[0, 1])
    with pytest.raises(ValueError, match="seed must be in"):
        env.restart_streams(seed=-1)
