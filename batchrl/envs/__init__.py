"""Environments written in TensorFlow ops: batched, in-graph and XLA-compilable."""

import importlib
from collections.abc import Callable

from batchrl.envs.acrobot import Acrobot
from batchrl.envs.cartpole import CartPole
from batchrl.envs.classic_control import ClassicControlEnv
from batchrl.envs.mountain_car_continuous import MountainCarContinuous
from batchrl.envs.pendulum import Pendulum
from batchrl.tools.in_graph_env import InGraphEnv

_REGISTRY = {
    "Acrobot-v1": Acrobot,
    "CartPole-v1": CartPole,
    "MountainCarContinuous-v0": MountainCarContinuous,
    "Pendulum-v1": Pendulum,
}


NAMES = tuple(sorted(_REGISTRY))


def resolve(name: str) -> Callable[..., InGraphEnv]:
    """The environment class for a Gymnasium id of a port, or for 'module:Class'.

    Args:
      name: one of `NAMES`, or an entry point 'package.module:Class' naming your own
        `InGraphEnv` subclass, whose constructor takes `(batch_size, seed=...,
        max_episode_steps=...)`.

    Raises:
      ValueError: the name is neither, or the entry point cannot be imported.
    """
    if name in _REGISTRY:
        return _REGISTRY[name]
    if ":" not in name:
        raise ValueError(
            f"Unknown environment {name!r}; valid names are {list(NAMES)} or an entry point "
            "'package.module:Class' of your own InGraphEnv."
        )
    module_name, _, attribute = name.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"Cannot load the environment {name!r}: {error}") from None


def make(name: str, batch_size: int, seed: int = 0, max_episode_steps: int = 0) -> InGraphEnv:
    """Builds a batch of `batch_size` in-graph environments.

    Args:
      name: a Gymnasium id of a port, e.g. 'Pendulum-v1', or 'package.module:Class'.
      batch_size: The number of environments B.
      seed: The seed of the initial-state streams, in [0, 2**31).
      max_episode_steps: The time limit; 0 keeps the environment's default.

    Returns:
      The environment.

    Raises:
      ValueError: If `name` names no environment.
    """
    constructor = resolve(name)
    if max_episode_steps:
        return constructor(batch_size, seed=seed, max_episode_steps=max_episode_steps)
    return constructor(batch_size, seed=seed)


__all__ = [
    "Acrobot",
    "CartPole",
    "ClassicControlEnv",
    "MountainCarContinuous",
    "Pendulum",
    "NAMES",
    "make",
    "resolve",
]
