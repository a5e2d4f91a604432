"""Atari games (ale-py) with TorchBeast's preprocessing, built from Gymnasium's wrappers."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from batchrl.config.config import ConfigError

# TorchBeast's preprocessing (OpenAI Baselines' `wrap_deepmind(make_atari(id))` with
# `frame_stack=True`, `clip_rewards=False`; the learner clips rewards).
NOOP_MAX = 30  # Up to 30 no-op actions at the start of each game.
FRAME_SKIP = 4  # Each action repeats for 4 frames; the observation is the max of the last 2.
SCREEN_SIZE = 84  # Frames in grayscale, resized to 84 x 84 (cv2's INTER_AREA).
FRAME_STACK = 4  # The observation holds the latest 4 frames: [84, 84, 4] uint8.
_ENTRY_POINT = "ale_py.env:AtariEnv"


def register_envs() -> None:
    """Registers ale-py's Gymnasium ids (ALE/*-v5, *NoFrameskip-v4, ...) by importing it.

    `GYMNASIUM_FAMILIES` names this function for the Atari ids.

    Raises:
      ConfigError: ale-py is not installed; says how to install it.
    """
    try:
        import ale_py
    except ImportError as error:
        raise ConfigError(
            f"Atari environments need ale-py ({error}): pip install -e '.[atari]'."
        ) from None
    gym.register_envs(ale_py)


def is_atari(env_id: str) -> bool:
    """Whether the registered Gymnasium id `env_id` is an ale-py game."""
    try:
        spec = gym.spec(env_id)
    except gym.error.Error:
        return False
    return spec.entry_point == _ENTRY_POINT


def make_atari(
    env_id: str,
    *,
    repeat_action_probability: float | None = None,
    full_action_space: bool = False,
    episodic_life: bool = False,
    max_episode_steps: int = 0,
    render_mode: str | None = None,
) -> gym.Env:
    """An ale-py game with TorchBeast's preprocessing; observations [84, 84, 4] uint8.

    From the emulator up: `gymnasium.wrappers.AtariPreprocessing` (up to 30 no-ops at
    reset, frame skip 4 with the max over the last two frames, 84 x 84 grayscale), then
    `EpisodicLife` when `episodic_life`, `FireReset` for games with a FIRE action,
    `gymnasium.wrappers.FrameStackObservation` (4 frames, the first repeated at reset)
    and the frames moved to the last axis, as convolutions in TensorFlow want them.
    Rewards are not clipped here (the learner does it: `impala.reward_clipping`).

    Args:
      env_id: a registered ale-py id, e.g. 'PongNoFrameskip-v4' or 'ALE/Pong-v5'. The
        emulator's own frame skip is turned off, whatever the id says.
      repeat_action_probability: sticky actions; None keeps the id's (v5: 0.25, v4: 0).
      full_action_space: all 18 actions instead of the game's minimal set.
      episodic_life: a lost life ends the episode (for training, not evaluation).
      max_episode_steps: a time limit in emulator frames; 0 keeps ale-py's 108,000.
      render_mode: Gymnasium's, e.g. 'rgb_array' for videos.

    Returns:
      The wrapped environment.
    """
    kwargs: dict[str, Any] = {"frameskip": 1, "full_action_space": full_action_space}
    if repeat_action_probability is not None:
        kwargs["repeat_action_probability"] = float(repeat_action_probability)
    if max_episode_steps:
        kwargs["max_num_frames_per_episode"] = int(max_episode_steps)
    if render_mode:
        kwargs["render_mode"] = render_mode
    env = gym.make(env_id, **kwargs)
    env = gym.wrappers.AtariPreprocessing(
        env,
        noop_max=NOOP_MAX,
        frame_skip=FRAME_SKIP,
        screen_size=SCREEN_SIZE,
        terminal_on_life_loss=False,  # Gymnasium's restarts the game at a life lost.
        grayscale_obs=True,
        scale_obs=False,
    )
    if episodic_life:
        env = EpisodicLife(env)
    meanings = env.unwrapped.get_action_meanings()
    if len(meanings) >= 3 and meanings[1] == "FIRE":  # Baselines asserts this of FIRE games.
        env = FireReset(env)
    env = gym.wrappers.FrameStackObservation(env, FRAME_STACK)
    return FramesLast(env)


class EpisodicLife(gym.Wrapper):
    """A lost life ends the episode, but only a lost game resets the emulator.

    Baselines' `EpisodicLifeEnv`, which TorchBeast trains with: `step` returns
    terminated when the number of lives drops; `reset` after such a step continues the
    game with one no-op step instead of starting a new one. Gymnasium's
    `AtariPreprocessing(terminal_on_life_loss=True)` restarts the game at every life
    lost, so an agent would never see its later lives.
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._lives = 0
        self._game_over = True

    def step(self, action):
        observ, reward, terminated, truncated, info = self.env.step(action)
        self._game_over = terminated or truncated
        lives = self.env.unwrapped.ale.lives()
        if 0 < lives < self._lives:
            terminated = True
        self._lives = lives
        return observ, reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if self._game_over or seed is not None:
            observ, info = self.env.reset(seed=seed, options=options)
        else:
            observ, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:  # Baselines does not check; a no-op may end it.
                observ, info = self.env.reset(options=options)
        self._game_over = False
        self._lives = self.env.unwrapped.ale.lives()
        return observ, info


class FireReset(gym.Wrapper):
    """Presses FIRE (action 1), then action 2, after each reset: games that wait for it.

    Baselines' `FireResetEnv`, which TorchBeast applies to every game with a FIRE action:
    a game that ends during these two steps is reset again.
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        meanings = env.unwrapped.get_action_meanings()
        if len(meanings) < 3 or meanings[1] != "FIRE":
            raise ValueError(f"FireReset needs FIRE as action 1 of 3 or more, got {meanings}.")

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        self.env.reset(seed=seed, options=options)
        observ, info = None, {}
        for action in (1, 2):
            observ, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                observ, info = self.env.reset(options=options)
        return observ, info


def _frames_last(observ: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(observ, 0, -1))


class FramesLast(gym.ObservationWrapper):
    """Stacked frames [S, H, W] as [H, W, S]: channels last, as TensorFlow convolves."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        space = env.observation_space
        self.observation_space = gym.spaces.Box(
            low=0, high=255, shape=space.shape[1:] + space.shape[:1], dtype=space.dtype
        )

    def observation(self, observation):
        return _frames_last(observation)
