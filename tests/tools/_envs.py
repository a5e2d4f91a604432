"""Small Gymnasium environments for the tests of environment processes and batches."""

from __future__ import annotations

import os
import sys
import time

import cloudpickle
import gymnasium as gym
import numpy as np


class CountEnv(gym.Env):
    """Observes [steps, last action, seed or -1]; action 2 terminates the episode.

    The reset info reports the worker's pid and whether TensorFlow was imported there.
    """

    observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    action_space = gym.spaces.Discrete(3)

    def __init__(self, delay: float = 0.0, fail_in: str | None = None, exit_code: int = 3):
        self.delay = delay
        self.fail_in = fail_in
        self.exit_code = exit_code
        self.closed = False
        self._steps = 0
        self._seed = -1
        if fail_in == "init":
            raise ValueError("CountEnv refuses to be built")

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if self.fail_in == "reset":
            raise ValueError("CountEnv refuses to reset")
        self._steps = 0
        self._seed = -1 if seed is None else seed
        info = {"pid": os.getpid(), "tensorflow": "tensorflow" in sys.modules}
        return np.array([0, 0, self._seed], np.float32), info

    def step(self, action):
        if self.fail_in == "step":
            raise KeyError("CountEnv refuses to step")
        if self.fail_in == "exit":
            os._exit(self.exit_code)
        time.sleep(self.delay)
        self._steps += 1
        observ = np.array([self._steps, action, self._seed], np.float32)
        return observ, float(action), action == 2, False, {"steps": self._steps}

    def close(self):
        self.closed = True


class BoxEnv(gym.Env):
    """Observes the action it was given, with its dtype; the action space is [-1, 1]^2."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.asarray(action), 0.0, False, False, {"dtype": str(np.asarray(action).dtype)}


class WrongShapeEnv(CountEnv):
    """A CountEnv that declares observations of shape (3,) and scalar rewards, but whose
    steps return an observation of `observ_shape` and a reward of `reward_shape`; its
    resets too when `in_reset`."""

    def __init__(self, observ_shape=(3,), reward_shape=(), in_reset=False):
        super().__init__()
        self.observ_shape = observ_shape
        self.reward_shape = reward_shape
        self.in_reset = in_reset

    def reset(self, *, seed=None, options=None):
        observ, info = super().reset(seed=seed, options=options)
        if self.in_reset:
            observ = np.resize(observ, self.observ_shape)
        return observ, info

    def step(self, action):
        observ, reward, terminated, truncated, info = super().step(action)
        observ = np.resize(observ, self.observ_shape)
        return observ, np.full(self.reward_shape, reward), terminated, truncated, info


# pytest imports the tests by path, so worker processes cannot import this module by name;
# cloudpickle sends its classes by value instead.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def register_probe_family():
    """A family of Gymnasium ids registered by a function, as MinAtar's and routing's are."""
    if "Probe/Count-v0" not in gym.registry:
        gym.register("Probe/Count-v0", entry_point="tests.tools._envs:CountEnv")
