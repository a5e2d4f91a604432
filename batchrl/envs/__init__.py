"""Environments written in TensorFlow ops: batched, in-graph and XLA-compilable."""

from batchrl.envs.acrobot import Acrobot
from batchrl.envs.cartpole import CartPole
from batchrl.envs.classic_control import ClassicControlEnv
from batchrl.envs.mountain_car_continuous import MountainCarContinuous
from batchrl.envs.pendulum import Pendulum

_REGISTRY = {
    "Acrobot-v1": Acrobot,
    "CartPole-v1": CartPole,
    "MountainCarContinuous-v0": MountainCarContinuous,
    "Pendulum-v1": Pendulum,
}


NAMES = tuple(sorted(_REGISTRY))


def make(
    name: str, batch_size: int, seed: int = 0, max_episode_steps: int = 0
) -> ClassicControlEnv:
    """Builds a batch of `batch_size` in-graph environments by their Gymnasium id.

    Args:
      name: The Gymnasium id, e.g. 'Pendulum-v1'.
      batch_size: The number of environments B.
      seed: The seed of the initial-state streams, in [0, 2**31).
      max_episode_steps: The time limit; 0 keeps Gymnasium's registered one.

    Returns:
      The environment.

    Raises:
      ValueError: If `name` is not one of the ported environments.
    """
    if name not in _REGISTRY:
        raise ValueError(f"Unknown environment {name!r}; valid names are {sorted(_REGISTRY)}.")
    if max_episode_steps:
        return _REGISTRY[name](batch_size, seed=seed, max_episode_steps=max_episode_steps)
    return _REGISTRY[name](batch_size, seed=seed)


__all__ = [
    "Acrobot",
    "CartPole",
    "ClassicControlEnv",
    "MountainCarContinuous",
    "Pendulum",
    "NAMES",
    "make",
]
