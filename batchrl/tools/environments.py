"""Builds Gymnasium environments and batches of them from the `env` section of a config."""

from __future__ import annotations

import difflib
import functools

import gymnasium as gym

from batchrl.tools.batch_env import BatchEnv
from batchrl.tools.config import ConfigError
from batchrl.tools.external_process import ExternalProcess

# A registered MockEnvironment, so configs and tests can name it like any other task.
gym.register(
    "batchrl/Mock-v0",
    entry_point="batchrl.tools.mock_environment:MockEnvironment",
    kwargs={"min_duration": 20, "max_duration": 40},
)


def check_env_id(env_id: str) -> None:
    """Raises ConfigError when `env_id` is not a registered Gymnasium environment."""
    try:
        gym.spec(env_id)
    except gym.error.Error as error:
        close = difflib.get_close_matches(env_id, list(gym.registry), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(
            f"env.id={env_id!r} is not a registered Gymnasium environment ({error}).{hint}"
        ) from None


def make_env(env_id: str, max_episode_steps: int = 0, render_mode: str | None = None):
    """A Gymnasium environment; `max_episode_steps` 0 keeps the registered time limit."""
    kwargs = {"render_mode": render_mode} if render_mode else {}
    if max_episode_steps:
        kwargs["max_episode_steps"] = max_episode_steps
    return gym.make(env_id, **kwargs)


def make_batch_env(env_config, num_envs: int, processes: bool | None = None) -> BatchEnv:
    """A batch of `num_envs` environments, in worker processes or in this one.

    Args:
      env_config: the `env` section of a config (`id`, `max_episode_steps`, `processes`).
      num_envs: how many environments.
      processes: overrides `env_config.processes` when given.

    Returns:
      A `BatchEnv`; close it when done.
    """
    check_env_id(env_config.id)
    if num_envs < 1:
        raise ConfigError(f"The number of environments must be at least 1, got {num_envs}.")
    processes = env_config.processes if processes is None else processes
    constructor = functools.partial(make_env, env_config.id, env_config.max_episode_steps)
    if not processes:
        return BatchEnv([constructor() for _ in range(num_envs)], blocking=True)
    envs = []
    try:
        for index in range(num_envs):
            envs.append(ExternalProcess(constructor, name=f"{index}:{env_config.id}"))
    except BaseException:
        for env in envs:
            env.close()
        raise
    return BatchEnv(envs, blocking=False)
