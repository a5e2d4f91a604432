"""EnvPool's Atari batch (env.engine: envpool) against the Gymnasium batch of `make_atari`."""

import gc
import importlib.util
import os
import sys

import cv2
import gymnasium as gym
import numpy as np
import pytest

from batchrl.config import ConfigError, load_run_config
from batchrl.tools.atari import register_envs
from batchrl.tools.batch_env import BatchEnv
from batchrl.tools.environments import make_batch_env

pytest.importorskip("ale_py", reason="pip install -e '.[atari]'")

from batchrl.tools.envpool_batch_env import EnvPoolBatchEnv  # noqa: E402

register_envs()
# All but the config checks, which must also hold (and say how to install it) without it.
needs_envpool = pytest.mark.skipif(
    importlib.util.find_spec("envpool") is None, reason="pip install -e '.[atari,envpool]'"
)


def config(*overrides):
    return load_run_config("pong_impala", ["env.engine=envpool", *overrides])


def play(batch_env, action, episodes, steps=4000):
    """Steps every environment with `action`, resetting ended episodes, until each has
    ended `episodes`; returns per environment their (return, length, terminated, lives
    at the end)."""
    size = len(batch_env)
    batch_env.reset(seed=0)
    ended = [[] for _ in range(size)]
    returns, lengths = np.zeros(size), np.zeros(size, int)
    for _ in range(steps):
        _, reward, terminated, truncated, infos = batch_env.step(np.full(size, action))
        returns += reward
        lengths += 1
        done = np.flatnonzero(terminated | truncated)
        for i in done:
            ended[i].append((returns[i], lengths[i], bool(terminated[i]), infos[i]["lives"]))
            returns[i], lengths[i] = 0, 0
        if len(done):
            batch_env.reset(done)
        if all(len(e) >= episodes for e in ended):
            return [e[:episodes] for e in ended]
    raise AssertionError(f"Fewer than {episodes} episodes in {steps} steps: {ended}")


def test_the_engine_is_checked_at_config_load(monkeypatch):
    with pytest.raises(ConfigError, match=r"env.engine='pool'.*\['gymnasium', 'envpool'\]"):
        load_run_config("pong_impala", ["env.engine=pool"])
    with pytest.raises(ConfigError, match="env.id='CartPole-v1' is not one"):
        load_run_config("cartpole_impala", ["env.engine=envpool"])
    with pytest.raises(ConfigError, match="env.engine='envpool'.*env.backend='tensorflow'"):
        load_run_config("cartpole_tf", ["env.engine=envpool"])
    if importlib.util.find_spec("envpool") is not None:
        assert config().env.engine == "envpool"
    monkeypatch.setitem(sys.modules, "envpool", None)  # As if not installed.
    with pytest.raises(ConfigError, match=r"needs envpool .*pip install -e '.\[atari,envpool\]'"):
        config()


@needs_envpool
def test_training_batches_are_envpools_and_evaluation_ones_gymnasiums():
    env_config = config("env.processes=false").env
    batch_env = make_batch_env(env_config, 2)
    assert isinstance(batch_env, EnvPoolBatchEnv) and len(batch_env) == 2
    eval_env = make_batch_env(env_config, 1, training=False)
    assert isinstance(eval_env, BatchEnv)
    assert batch_env.observation_space == eval_env.observation_space
    assert batch_env.action_space == eval_env.action_space == gym.spaces.Discrete(6)
    batch_env.close()
    eval_env.close()


@needs_envpool
def test_observations_are_make_ataris_frames_frame_for_frame():
    """Without the random no-ops (noop_max 1: none, then EnvPool's one FIRE frame), Pong
    is deterministic: every stacked frame equals Gymnasium's AtariPreprocessing (max of
    the last two of 4 frames, 84 x 84 grayscale INTER_AREA) for 300 random actions.
    Both games of the batch play the same actions; their seeds (no-ops, sticky actions)
    do not matter here."""
    with EnvPoolBatchEnv("PongNoFrameskip-v4", 2, noop_max=1) as batch_env:
        assert batch_env.observation_space == gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
        observ = batch_env.reset(seed=3)
        assert observ.shape == (2, 84, 84, 4) and observ.dtype == np.uint8
        assert observ.flags.c_contiguous
        reference = gym.wrappers.AtariPreprocessing(
            gym.make("PongNoFrameskip-v4", frameskip=1), noop_max=0
        )
        reference.reset(seed=0)
        ale = reference.unwrapped.ale
        ale.act(1)  # EnvPool's FIRE frame.
        frame = cv2.resize(ale.getScreenGrayscale(), (84, 84), interpolation=cv2.INTER_AREA)
        for k in range(4):  # A new game fills the stack with its first frame.
            np.testing.assert_array_equal(observ[:, :, :, k], np.stack([frame, frame]))
        scores = 0
        for action in np.random.default_rng(0).integers(0, 6, size=300):
            latest = observ
            observ, reward, terminated, truncated, infos = batch_env.step([action, action])
            frame, expected, *flags, _ = reference.step(action)
            np.testing.assert_array_equal(observ[:, :, :, -1], np.stack([frame, frame]))
            np.testing.assert_array_equal(observ[:, :, :, :3], latest[:, :, :, 1:])
            assert list(reward) == [expected] * 2
            assert [terminated[0], truncated[0]] == flags
            scores += expected != 0
        assert scores > 0 and infos[0] == {"lives": 0, "game_over": False}
        assert reward.dtype == np.float32 and terminated.dtype == truncated.dtype == bool


@needs_envpool
def test_episodes_end_as_in_the_gymnasium_batch():
    """On fake actions both engines play the same episodes, up to the no-ops' offsets.
    Always NOOP, Pong is lost 0 to 21 in each of 2 games (terminated, return -21), the
    lengths within 10 steps of each other (Gymnasium's reset takes 1 to 30 no-op frames
    and two steps of FIRE-reset, EnvPool's 0 to 29 and a FIRE frame). With episodic
    life, a game of Breakout is 5 episodes, one per life, and the next game starts."""
    lengths = {}
    for engine in ("envpool", "gymnasium"):
        env_config = config(f"env.engine={engine}").env
        batch_env = make_batch_env(env_config, 2, processes=False, training=False)
        if engine == "envpool":  # Evaluation batches are Gymnasium's: a whole-game pool.
            batch_env.close()
            batch_env = EnvPoolBatchEnv(env_config.id, 2)
        episodes = play(batch_env, 0, episodes=1)
        batch_env.close()
        assert [(ret, ended) for ((ret, _, ended, _),) in episodes] == [(-21, True)] * 2
        lengths[engine] = np.mean([length for ((_, length, _, _),) in episodes])
    assert abs(lengths["envpool"] - lengths["gymnasium"]) <= 10, lengths
    lives = {}
    for engine in ("envpool", "gymnasium"):
        env_config = config("env.id=BreakoutNoFrameskip-v4", f"env.engine={engine}").env
        batch_env = make_batch_env(env_config, 2, processes=False)  # Training: per life.
        lives[engine] = [[(end, n) for *_, end, n in e] for e in play(batch_env, 0, 6)]
        batch_env.close()
    game = [(True, 4), (True, 3), (True, 2), (True, 1), (True, 0), (True, 4)]
    assert lives["envpool"] == lives["gymnasium"] == [game] * 2


@needs_envpool
def test_life_losses_continue_the_game_and_the_time_limit_counts_frames():
    with EnvPoolBatchEnv("BreakoutNoFrameskip-v4", 1, episodic_life=True) as batch_env:
        batch_env.reset(seed=0)
        seen = []
        for _ in range(3000):
            _, _, terminated, _, infos = batch_env.step([0])
            if terminated[0]:
                seen.append((infos[0]["lives"], infos[0]["game_over"]))
                batch_env.reset([0])
            if len(seen) == 5:
                break
        assert seen == [(4, False), (3, False), (2, False), (1, False), (0, True)]
    # 400 frames are 100 steps of 4 frames; then truncated, not terminated.
    with EnvPoolBatchEnv("PongNoFrameskip-v4", 2, max_episode_steps=400) as batch_env:
        batch_env.reset(seed=0)
        for step in range(1, 101):
            _, _, terminated, truncated, _ = batch_env.step([0, 0])
            assert not terminated.any() and truncated.all() == (step == 100)


@needs_envpool
def test_seeds_resets_and_bad_calls():
    with EnvPoolBatchEnv("PongNoFrameskip-v4", 3) as batch_env:
        with pytest.raises(RuntimeError, match="never reset"):
            batch_env.step([0, 0, 0])
        first = batch_env.reset(seed=7)
        for _ in range(5):
            batch_env.step([1, 2, 3])
        np.testing.assert_array_equal(batch_env.reset(seed=7), first)  # The same no-ops.
        assert batch_env.reset([2, 0]).shape == (2, 84, 84, 4)
        assert batch_env.reset([]).shape == (0, 84, 84, 4)
        with pytest.raises(ValueError, match="takes no indices"):
            batch_env.reset([0], seed=1)
        with pytest.raises(IndexError, match="environment 3"):
            batch_env.reset([3])
        with pytest.raises(ValueError, match=r"shape \(3,\)"):
            batch_env.step([0, 0])
        with pytest.raises(ValueError, match="Action 6 for environment 1"):
            batch_env.step([0, 6, 0])
    with pytest.raises(RuntimeError, match="closed"):
        batch_env.step([0, 0, 0])


@needs_envpool
@pytest.mark.slow  # Out of the default suite: 14 s on 2 busy cores (2026-12-06).
def test_close_joins_envpools_threads():
    def threads():
        gc.collect()
        return len(os.listdir("/proc/self/task"))

    before = threads()
    batch_env = EnvPoolBatchEnv("PongNoFrameskip-v4", 2, num_threads=2)
    batch_env.reset(seed=0)
    assert threads() >= before + 2
    batch_env.close()
    assert threads() == before


def test_arrays_of_strides_0_are_read_with_c_strides():
    """EnvPool 0.8.4 under NumPy 2 returns arrays of strides 0 over whole C-ordered data."""
    from numpy.lib.stride_tricks import as_strided

    from batchrl.tools.envpool_batch_env import _rows

    data = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    broken = as_strided(data, data.shape, (0, 0, 0))
    assert (broken == 0).all()
    np.testing.assert_array_equal(_rows(broken), data)
    assert _rows(data) is data  # Arrays with strides are kept.
    single = as_strided(data, (1,), (0,))
    assert _rows(single) is single
