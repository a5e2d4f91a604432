"""A stand-in for a slow simulator: each step sleeps 2 ms without using the CPU.

`env.id: bench.ray_envs:batchrl-bench/Sleepy-v0` imports this module, which registers it:
`MockEnvironment` episodes of exactly 50 steps, observations [4], two discrete actions.
"""

import time

import gymnasium as gym

from batchrl.testing.mock_environment import MockEnvironment

STEP_SECONDS = 0.002


class SleepyEnv(MockEnvironment):
    def __init__(self):
        super().__init__((4,), gym.spaces.Discrete(2), min_duration=50, max_duration=50)

    def step(self, action):
        time.sleep(STEP_SECONDS)
        return super().step(action)


gym.register("batchrl-bench/Sleepy-v0", entry_point=SleepyEnv)
