"""Atari games through `make_env`: TorchBeast's preprocessing against Gymnasium's wrappers."""

import gymnasium as gym
import numpy as np
import pytest

from batchrl.tools.atari import FRAME_STACK, is_atari, make_atari, register_envs
from batchrl.tools.environments import check_env_id, make_env

pytest.importorskip("ale_py", reason="pip install -e '.[atari]'")
pytest.importorskip("cv2", reason="pip install -e '.[atari]'")


def gymnasium_frames(env_id, seed, actions):
    """Gymnasium's own wrappers: AtariPreprocessing's frames [84, 84], and the rewards and
    flags, after the reset and the two FIRE-reset steps (actions 1 and 2) done by hand."""
    env = gym.wrappers.AtariPreprocessing(gym.make(env_id, frameskip=1), noop_max=30)
    env.reset(seed=seed)
    for action in (1, 2):
        frame, *_ = env.step(action)
    frames, steps = [frame], []
    for action in actions:
        frame, reward, terminated, truncated, _ = env.step(action)
        frames.append(frame)
        steps.append((reward, terminated, truncated))
        if terminated or truncated:
            break
    env.close()
    return frames, steps


def test_preprocessing_equals_gymnasiums_wrappers_frame_for_frame():
    """Pong, seed 3, 300 random actions (1,200 frames).

    The differences to Gymnasium's wrappers, each undone here: FIRE-reset steps (actions
    1 then 2 after each reset, as TorchBeast does for games with FIRE) are taken by hand
    on the reference; the frame stack is [84, 84, 4] (frames last, for TensorFlow's
    convolutions), where FrameStackObservation gives [4, 84, 84]; and the stack starts
    from the frame after the FIRE steps, repeated 4 times, where FrameStackObservation
    put before the FIRE steps would repeat the frame of the reset.
    """
    actions = np.random.default_rng(0).integers(0, 6, size=300)
    frames, steps = gymnasium_frames("PongNoFrameskip-v4", 3, actions)
    env = make_env("PongNoFrameskip-v4")
    assert env.observation_space == gym.spaces.Box(0, 255, (84, 84, FRAME_STACK), np.uint8)
    assert env.action_space == gym.spaces.Discrete(6)
    observ, _ = env.reset(seed=3)
    assert observ.dtype == np.uint8
    padded = [frames[0]] * (FRAME_STACK - 1) + frames  # The stack's first frames.
    np.testing.assert_array_equal(observ, np.stack(padded[:FRAME_STACK], axis=-1))
    assert frames[0].max() > 0  # Real frames, not zeros.
    for t, (action, step) in enumerate(zip(actions, steps, strict=False)):
        observ, reward, terminated, truncated, _ = env.step(action)
        np.testing.assert_array_equal(observ, np.stack(padded[t + 1 : t + 5], axis=-1))
        assert (reward, terminated, truncated) == step
    assert any(reward != 0 for reward, *_ in steps)  # Pong scored within the 300 steps.
    env.close()


def test_episodic_life_ends_episodes_at_a_lost_life_but_not_the_game():
    """Breakout has 5 lives: a lost one terminates the episode, and the reset after it
    continues the same game (4 lives left, no new no-ops), as Baselines' EpisodicLifeEnv."""
    env = make_atari("BreakoutNoFrameskip-v4", episodic_life=True)
    ale = env.unwrapped.ale
    env.reset(seed=0)
    assert ale.lives() == 5
    rng = np.random.default_rng(0)
    for _ in range(5000):
        _, _, terminated, truncated, _ = env.step(int(rng.integers(4)))
        if terminated or truncated:
            break
    assert terminated and ale.lives() == 4
    frame = ale.getFrameNumber()
    env.reset()
    assert ale.lives() == 4  # The same game goes on, after a no-op step and FIRE-reset's
    assert ale.getFrameNumber() - frame == 3 * 4  # two steps: 3 steps of 4 frames.
    # Without episodic life a lost life does not end the episode.
    env = make_atari("BreakoutNoFrameskip-v4")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(5000):
        _, _, terminated, truncated, _ = env.step(int(rng.integers(4)))
        if env.unwrapped.ale.lives() < 5:
            break
    assert not terminated and env.unwrapped.ale.lives() == 4


def test_sticky_actions_and_full_action_space_are_passed_to_the_emulator():
    env = make_env("ALE/Pong-v5")
    assert env.unwrapped.ale.getFloat("repeat_action_probability") == pytest.approx(0.25)
    assert env.unwrapped._frameskip == 1  # Frames are skipped by the wrapper instead.
    env = make_env("PongNoFrameskip-v4", repeat_action_probability=0.1, full_action_space=True)
    assert env.unwrapped.ale.getFloat("repeat_action_probability") == pytest.approx(0.1)
    assert env.action_space == gym.spaces.Discrete(18)
    env = make_env("PongNoFrameskip-v4")
    assert env.unwrapped.ale.getFloat("repeat_action_probability") == 0.0
    with pytest.raises(ValueError, match="not an Atari game"):
        make_env("CartPole-v1", episodic_life=True)


def test_atari_ids_register_as_a_family():
    register_envs()
    check_env_id("ALE/Breakout-v5")
    check_env_id("BreakoutNoFrameskip-v4")
    assert is_atari("BreakoutNoFrameskip-v4") and is_atari("ALE/Pong-v5")
    assert not is_atari("CartPole-v1") and not is_atari("NoSuchGame-v0")
