"""Environments written in TensorFlow ops: batched, in-graph and XLA-compilable.

Ports of Gymnasium's classic-control tasks (one module each) and the routing family, a
folder that brings its topologies as data (`routing/`). Each is an `InGraphEnv`, made by
its Gymnasium id through `batchrl.config.ENVIRONMENTS`; the machinery that batches
Gymnasium environments in processes is in `batchrl.tools`.
"""

from collections.abc import Callable

from batchrl.config.registry import ENVIRONMENTS
from batchrl.envs.acrobot import Acrobot
from batchrl.envs.cartpole import CartPole
from batchrl.envs.classic_control import ClassicControlEnv
from batchrl.envs.mountain_car_continuous import MountainCarContinuous
from batchrl.envs.pendulum import Pendulum
from batchrl.tools.environments import make_tensorflow_env
from batchrl.tools.in_graph_env import InGraphEnv

NAMES = tuple(ENVIRONMENTS.names)


def resolve(name: str) -> Callable[..., InGraphEnv]:
    """The environment class for a Gymnasium id of a port, or for 'module:Class'.

    Args:
      name: one of `NAMES`, or an entry point 'package.module:Class' naming your own
        `InGraphEnv` subclass, whose constructor takes `(batch_size, seed=...,
        max_episode_steps=...)`.

    Raises:
      ValueError: the name is neither, or the entry point cannot be imported.
    """
    return ENVIRONMENTS.resolve(name)


def make(name: str, batch_size: int, seed: int = 0, max_episode_steps: int = 0) -> InGraphEnv:
    """Builds a batch of `batch_size` in-graph environments.

    Args:
      name: a Gymnasium id of a port, e.g. 'Pendulum-v1', or 'package.module:Class'.
      batch_size: The number of environments B.
      seed: The seed of the initial-state streams, in [0, 2**31).
      max_episode_steps: The time limit; 0 keeps the environment's default.

    Raises:
      ValueError: If `name` names no environment.
    """
    return make_tensorflow_env(name, batch_size, seed, max_episode_steps)


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
