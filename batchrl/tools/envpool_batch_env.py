"""Atari games stepped in EnvPool's C++ thread pool, as a `BatchEnv` (env.engine: envpool)."""

from __future__ import annotations

import contextlib
import io
import math
import sys
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from numpy.lib.stride_tricks import as_strided

from batchrl.config.config import ConfigError
from batchrl.tools.atari import (
    FRAME_SKIP,
    FRAME_STACK,
    NOOP_MAX,
    SCREEN_SIZE,
    is_atari,
    register_envs,
)

INSTALL = "pip install -e '.[atari,envpool]' (Linux x86_64, Python 3.10 or 3.11)"


def import_envpool():
    """The `envpool` module, imported without the notice its dependency gym 0.26 prints.

    Raises:
      ConfigError: envpool is not installed; says how to install it.
    """
    if sys.modules.get("envpool") is not None:  # No redirection: other threads may print.
        return sys.modules["envpool"]
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # gym's "unmaintained since 2022".
            import envpool
    except ImportError as error:
        raise ConfigError(f"env.engine='envpool' needs envpool ({error}): {INSTALL}.") from None
    return envpool


def envpool_task(env_id: str) -> str:
    """EnvPool's task id of the ale-py game `env_id`: 'PongNoFrameskip-v4' -> 'Pong-v5'.

    EnvPool has one id per game; the protocol (sticky actions, frame skip, time limit)
    comes from its options, which `EnvPoolBatchEnv` sets as `make_atari` would for
    `env_id`.

    Raises:
      ConfigError: ale-py or envpool is missing, `env_id` is not an ale-py game, or
        EnvPool does not have it.
    """
    register_envs()  # The ale-py ids, whose `game` names EnvPool's task.
    if not is_atari(env_id):
        raise ConfigError(
            f"env.engine='envpool' runs Atari games (ale-py ids such as PongNoFrameskip-v4) "
            f"only; env.id={env_id!r} is not one. Use env.engine='gymnasium'."
        )
    game = gym.spec(env_id).kwargs["game"]
    task = "".join(part.capitalize() for part in game.split("_")) + "-v5"
    if task not in import_envpool().list_all_envs():
        raise ConfigError(
            f"env.engine='envpool': EnvPool has no game {game!r} (task {task!r}) for "
            f"env.id={env_id!r}. Use env.engine='gymnasium'."
        )
    return task


class EnvPoolBatchEnv:
    """N Atari games in one EnvPool, stepped all at once; `BatchEnv`'s interface.

    EnvPool (Weng et al. 2022) runs the emulators and the preprocessing in a C++
    thread pool. The options follow `make_atari` (TorchBeast's protocol): up to 30
    no-ops at reset, frame skip 4 with the max of the last two frames, 84 x 84
    grayscale (INTER_AREA), 4 frames stacked, FIRE at reset in games that have it, no
    reward clipping, sticky actions and the action set of the id, and a lost life ends
    the episode with `episodic_life`. Observations are [N, 84, 84, 4] uint8, EnvPool's
    [N, 4, 84, 84] transposed in one copy. As with `BatchEnv`, environments are never
    reset automatically: reset the ended ones before the next step (EnvPool would
    otherwise reset them in that step and return the first observation).

        with EnvPoolBatchEnv("PongNoFrameskip-v4", 8, episodic_life=True) as envs:
            observ = envs.reset(seed=0)                        # [8, 84, 84, 4]
            observ, reward, terminated, truncated, infos = envs.step(actions)
            envs.reset(np.where(terminated | truncated)[0])    # [K, 84, 84, 4]

    Where it differs from `make_atari` (EnvPool's C++, `atari_env.h`):

    - At reset, 0 to 29 no-op frames and then one FIRE frame in games with FIRE, 1 to 30
      no-ops in others; `make_atari` takes 1 to 30 no-op frames and then two steps of 4
      frames, FIRE and action 2 (Baselines' `FireResetEnv`).
    - After a lost life (with `episodic_life`) the reset takes 0 to 29 no-op frames and
      a FIRE frame again, and the frame stack goes on from the frames of the lost life;
      `make_atari` takes one no-op step and the two FIRE-reset steps, and fills the stack
      with the new first frame.
    - The time limit counts agent steps after the reset (`max_episode_steps` frames / 4,
      rounded up); ale-py counts emulator frames from the start of the game, the reset's
      no-op and FIRE frames included.
    - Seeds: environment i draws its no-ops and sticky actions from seed `seed + i`, as
      in `BatchEnv`, but from another generator than ale-py's, so the games differ from
      Gymnasium's of the same seed. A seed is given when the pool is built, so
      `reset(seed=...)` builds a new pool.
    - The emulator and ROMs are EnvPool's own build of ALE, not ale-py 0.12.1's; the
      frames of Pong are the same (tests/tools/test_envpool_batch_env.py).

    EnvPool's asynchronous mode (a batch of the first games to finish their step) is
    not offered: the actors' unrolls need every environment at every step.
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        *,
        repeat_action_probability: float | None = None,
        full_action_space: bool = False,
        episodic_life: bool = False,
        max_episode_steps: int = 0,
        num_threads: int = 0,
        noop_max: int = NOOP_MAX,
    ):
        """Reads the spaces; the pool itself is built by the first `reset`.

        Args:
          env_id: a registered ale-py id, e.g. 'PongNoFrameskip-v4' or 'ALE/Pong-v5'.
          num_envs: N, at least 1.
          repeat_action_probability: sticky actions; None keeps the id's (v5: 0.25,
            v4: 0).
          full_action_space: all 18 actions instead of the game's minimal set.
          episodic_life: a lost life ends the episode (for training, not evaluation).
          max_episode_steps: a time limit in emulator frames; 0 keeps the id's (108,000).
          num_threads: EnvPool's threads; 0 lets it choose (min(N, cores)).
          noop_max: at most this many no-op frames at reset (tests set 1).

        Raises:
          ConfigError: envpool is missing, or `env_id` is not an Atari game it has.
        """
        if num_envs < 1:
            raise ValueError(f"EnvPoolBatchEnv needs at least 1 environment, got {num_envs}.")
        self._envpool = import_envpool()
        self._task = envpool_task(env_id)
        kwargs = gym.spec(env_id).kwargs
        if repeat_action_probability is None:
            repeat_action_probability = kwargs.get("repeat_action_probability", 0.0)
        frames = max_episode_steps or kwargs.get("max_num_frames_per_episode") or 108_000
        self._options = dict(
            num_envs=num_envs,
            batch_size=num_envs,  # Synchronous: every step returns all N games.
            num_threads=num_threads,
            repeat_action_probability=float(repeat_action_probability),
            full_action_space=bool(full_action_space),
            episodic_life=bool(episodic_life),
            max_episode_steps=math.ceil(frames / FRAME_SKIP),  # EnvPool counts steps.
            noop_max=noop_max,
            frame_skip=FRAME_SKIP,
            img_height=SCREEN_SIZE,
            img_width=SCREEN_SIZE,
            stack_num=FRAME_STACK,
            gray_scale=True,
            use_inter_area_resize=True,
            use_fire_reset=True,
            reward_clip=False,  # The learner clips (impala.reward_clipping).
            zero_discount_on_life_loss=False,
        )
        spec = self._envpool.make_spec(self._task, **self._options)
        self.observation_space = gym.spaces.Box(
            0, 255, (SCREEN_SIZE, SCREEN_SIZE, FRAME_STACK), np.uint8
        )
        self.action_space = gym.spaces.Discrete(int(spec.action_space.n))
        self._size = num_envs
        self._all = np.arange(num_envs, dtype=np.int32)
        self._pool = None

    def __len__(self) -> int:
        return self._size

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list]:
        """Steps every game with its action.

        Args:
          actions: integers [N] of the action space.

        Returns:
          observ [N, 84, 84, 4] uint8, reward [N] float32, terminated [N] bool,
          truncated [N] bool, and N info dicts with the game's `lives` and `game_over`.

        Raises:
          ValueError: the shape of `actions` is wrong, or an action is outside the space.
          RuntimeError: the batch is closed or was never reset.
        """
        actions = np.asarray(actions)
        n = self.action_space.n
        if actions.shape != (self._size,) or not np.issubdtype(actions.dtype, np.integer):
            raise ValueError(
                f"Actions must be integers of shape ({self._size},) for the batch of "
                f"{self._size} games, got {actions.dtype} {actions.shape}."
            )
        if actions.min() < 0 or actions.max() >= n:
            index = int(np.argmax((actions < 0) | (actions >= n)))
            raise ValueError(
                f"Action {actions[index]} for environment {index} is outside "
                f"{self.action_space!r}; valid actions are integers in [0, {n})."
            )
        pool = self._live_pool()
        pool.send(actions.astype(np.int32), self._all)
        state = self._receive(pool, self._all)
        trunc = state["trunc"]
        infos = [
            {"lives": int(lives), "game_over": bool(over)}
            for lives, over in zip(state["info:lives"], state["info:terminated"])
        ]
        return (
            _frames_last(state["obs"]),
            state["reward"].astype(np.float32),
            state["done"] & ~trunc,
            trunc.astype(bool),
            infos,
        )

    def reset(self, indices: Sequence[int] | None = None, seed: int | None = None) -> np.ndarray:
        """Resets the games at `indices`, all of them when None.

        Args:
          indices: K distinct environment indices.
          seed: when given, a new pool whose game i has seed `seed + i`; resets all
            games, so `indices` must be None.

        Returns:
          observ [K, 84, 84, 4] uint8, the first observations of the new episodes.
        """
        if seed is not None:
            if indices is not None:
                raise ValueError(
                    "EnvPool seeds its games when it builds them: reset(seed=...) resets "
                    f"all {self._size} of them, so it takes no indices (got {indices})."
                )
            self.close()
            self._pool = self._envpool.make(
                self._task, env_type="gymnasium", seed=int(seed), **self._options
            )
        elif self._pool is None:
            return self.reset(seed=int(np.random.SeedSequence().entropy % 2**31))
        ids = self._all if indices is None else np.asarray(indices, np.int32).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= self._size):
            raise IndexError(
                f"Cannot reset environment {ids[(ids < 0) | (ids >= self._size)][0]}: valid "
                f"indices are 0 to {self._size - 1}."
            )
        if not ids.size:
            return np.zeros((0,) + self.observation_space.shape, np.uint8)
        pool = self._live_pool()
        pool._reset(ids)  # The public reset would convert the infos we do not read.
        return _frames_last(self._receive(pool, ids)["obs"])

    def close(self) -> None:
        """Drops the pool; EnvPool's destructor stops and joins its threads."""
        self._pool = None

    def __enter__(self) -> EnvPoolBatchEnv:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _live_pool(self):
        pool = self._pool
        if pool is None:
            raise RuntimeError("The EnvPool batch is closed (or was never reset).")
        return pool

    @staticmethod
    def _receive(pool, ids: np.ndarray) -> dict[str, np.ndarray]:
        """EnvPool's next batch of states, as C-ordered arrays in the order of `ids`."""
        state = {key: _rows(value) for key, value in zip(pool._state_keys, pool._recv())}
        got = state["info:env_id"]
        if np.array_equal(got, ids):  # Synchronous mode answers in the order asked.
            return state
        if not np.array_equal(np.sort(got), np.sort(ids)):
            raise RuntimeError(f"EnvPool answered for environments {got}, asked for {ids}.")
        order = np.argsort(got)[np.argsort(np.argsort(ids))]
        return {key: value[order] for key, value in state.items()}


def _rows(array: np.ndarray) -> np.ndarray:
    """`array` with C strides; EnvPool 0.8.4 under NumPy 2 returns strides of 0.

    Its wheel was built with pybind11 2.11, which reads a dtype's item size where
    NumPy 1 kept it; NumPy 2 moved it, so every array EnvPool returns has strides 0 and
    shows the first element everywhere. The data behind it is whole and C-ordered.
    """
    if array.size <= 1 or any(array.strides):  # A build for NumPy 2 gives its strides.
        return array
    strides = np.cumprod((array.shape[1:] + (1,))[::-1])[::-1] * array.itemsize
    return as_strided(array, array.shape, tuple(int(s) for s in strides), writeable=False)


def _frames_last(observ: np.ndarray) -> np.ndarray:
    """EnvPool's [K, 4, 84, 84] as [K, 84, 84, 4], in one copy."""
    return np.ascontiguousarray(observ.transpose(0, 2, 3, 1))
