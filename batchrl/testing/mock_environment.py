"""A Gymnasium environment with known episode lengths, for tests."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class MockEnvironment(gym.Env):
    """Deterministic episodes whose length is drawn from [min_duration, max_duration].

    The observation is the number of steps taken in the episode so far, broadcast to
    `observation_shape`; the reward of the k-th step of an episode is k, so an episode of
    length L returns L * (L + 1) / 2. An episode ends after its drawn duration by
    termination, or by truncation when `truncate` is true (as a time limit would). The
    environment validates every action it receives and records what it saw, so tests can
    compare against an exact oracle.

    Attributes:
      steps: the number of steps of each episode, the current one last.
      durations: the drawn duration of each episode.
      actions: every action received, in order.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        observation_shape: tuple[int, ...] = (2,),
        action_space: gym.Space | None = None,
        min_duration: int = 5,
        max_duration: int = 5,
        truncate: bool = False,
    ):
        if not 1 <= min_duration <= max_duration:
            raise ValueError(
                f"Invalid durations min_duration={min_duration}, max_duration={max_duration}; "
                "they must satisfy 1 <= min_duration <= max_duration."
            )
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, observation_shape, np.float32)
        self.action_space = action_space or gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self._min_duration = min_duration
        self._max_duration = max_duration
        self._truncate = truncate
        self._rng = np.random.default_rng()
        self._duration = None
        self.steps = []
        self.durations = []
        self.actions = []

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._duration = int(self._rng.integers(self._min_duration, self._max_duration + 1))
        self.steps.append(0)
        self.durations.append(self._duration)
        return self._observ(), {}

    def step(self, action):
        if self._duration is None:
            raise RuntimeError("MockEnvironment.step() called before reset().")
        if self.steps[-1] >= self._duration:
            raise RuntimeError(
                f"MockEnvironment.step() called after the episode ended at step {self._duration}; "
                "call reset() first."
            )
        if not self.action_space.contains(np.asarray(action, self.action_space.dtype)):
            raise ValueError(f"Action {action!r} is not in the action space {self.action_space}.")
        self.actions.append(np.array(action))
        self.steps[-1] += 1
        reward = float(self.steps[-1])
        ended = self.steps[-1] >= self._duration
        terminated = ended and not self._truncate
        truncated = ended and self._truncate
        return self._observ(), reward, terminated, truncated, {}

    def _observ(self):
        return np.full(self.observation_space.shape, self.steps[-1], np.float32)
