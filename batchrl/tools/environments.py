"""Builds Gymnasium environments and batches of them from the `env` section of a config."""

from __future__ import annotations

import difflib
import fnmatch
import functools
import importlib
from collections.abc import Sequence
from pathlib import Path

import gymnasium as gym

from batchrl.config.config import ConfigError, check_choice, require, require_positive
from batchrl.config.registry import ENVIRONMENTS, GYMNASIUM_FAMILIES
from batchrl.config.section import Section
from batchrl.tools.atari import is_atari, make_atari
from batchrl.tools.batch_env import BatchEnv, GroupedBatchEnv, make_group
from batchrl.tools.external_process import ExternalProcess

# A registered MockEnvironment, so configs and tests can name it like any other task.
gym.register(
    "batchrl/Mock-v0",
    entry_point="batchrl.testing.mock_environment:MockEnvironment",
    kwargs={"min_duration": 20, "max_duration": 40},
)


def _register_family(env_id: str) -> None:
    """Registers the Gymnasium ids of `env_id`'s family, if `GYMNASIUM_FAMILIES` names it."""
    if env_id in gym.registry:
        return
    for prefix in GYMNASIUM_FAMILIES.names:
        if ("*" in prefix and fnmatch.fnmatchcase(env_id, prefix)) or env_id.startswith(prefix):
            try:
                register = GYMNASIUM_FAMILIES.resolve(prefix)
            except ConfigError as error:
                module = GYMNASIUM_FAMILIES.entry_point(prefix).partition(":")[0]
                raise ConfigError(
                    f"env.id={env_id!r} needs the package that provides {module} ({error}); "
                    f"install it (pip install the project that ships {module!r})."
                ) from None
            register()
            return


def check_env_id(env_id: str) -> None:
    """Raises ConfigError when `env_id` is not a registered Gymnasium environment.

    `env_id` may be 'package.module:Env-v0', Gymnasium's form that imports the module
    (which registers the environment) first.
    """
    module, sep, name = env_id.rpartition(":")
    if sep:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ConfigError(
                f"env.id={env_id!r}: cannot import the module {module!r} that should register "
                f"{name!r} ({error})."
            ) from None
        env_id = name
    _register_family(env_id)
    try:
        gym.spec(env_id)
    except gym.error.Error as error:
        close = difflib.get_close_matches(env_id, list(gym.registry), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(
            f"env.id={env_id!r} is not a registered Gymnasium environment ({error}).{hint}"
        ) from None


def make_env(
    env_id: str,
    max_episode_steps: int = 0,
    render_mode: str | None = None,
    **atari_options,
):
    """A Gymnasium environment; `max_episode_steps` 0 keeps the registered time limit.

    An Atari game (ale-py) gets TorchBeast's preprocessing (`batchrl.tools.atari`), and
    `atari_options` are `make_atari`'s: `repeat_action_probability`,
    `full_action_space`, `episodic_life`. Its `max_episode_steps` counts emulator frames.

    Raises:
      ValueError: `atari_options` set for an environment that is not an Atari game.
    """
    _register_family(env_id)
    if is_atari(env_id):
        return make_atari(
            env_id, max_episode_steps=max_episode_steps, render_mode=render_mode, **atari_options
        )
    options = dict(atari_options)
    if options.pop("repeat_action_probability", None) is not None or any(options.values()):
        raise ValueError(f"{env_id!r} is not an Atari game; it takes no {atari_options}.")
    kwargs = {"render_mode": render_mode} if render_mode else {}
    if max_episode_steps:
        kwargs["max_episode_steps"] = max_episode_steps
    return gym.make(env_id, **kwargs)


def env_options(env_config, training: bool = True) -> dict:
    """The keyword arguments of `make_env` that the `env` section sets for Atari games.

    `episodic_life` holds for training only: evaluations play whole games.
    """
    return {
        "repeat_action_probability": env_config.get("repeat_action_probability"),
        "full_action_space": env_config.get("full_action_space", False),
        "episodic_life": training and env_config.get("episodic_life", False),
    }


def make_batch_env(
    env_config, num_envs: int, processes: bool | None = None, training: bool = True
) -> BatchEnv:
    """A batch of `num_envs` environments, in worker processes or in this one.

    With processes, each worker steps `env_config.envs_per_process` environments in turn
    (the last worker fewer when that does not divide `num_envs`).

    Args:
      env_config: the `env` section of a config (`id`, `max_episode_steps`, `processes`,
        `envs_per_process`, `worker_timeout`, and the Atari keys).
      num_envs: how many environments.
      processes: overrides `env_config.processes` when given.
      training: false for evaluation environments (no episodic life on Atari; always
        Gymnasium's, whatever `env.engine` says: evaluations play whole games as the
        Gymnasium engine does, so their returns compare across engines).

    Returns:
      A `BatchEnv`, or for training with `env.engine` envpool an `EnvPoolBatchEnv`
      (which ignores the keys of processes); close it when done.
    """
    check_env_id(env_config.id)
    if num_envs < 1:
        raise ConfigError(f"The number of environments must be at least 1, got {num_envs}.")
    if training and env_config.get("engine", "gymnasium") == "envpool":
        # Imported here: envpool (and the gym 0.26 it imports) loads only for it.
        from batchrl.tools.envpool_batch_env import EnvPoolBatchEnv

        return EnvPoolBatchEnv(
            env_config.id,
            num_envs,
            max_episode_steps=env_config.max_episode_steps,
            **env_options(env_config, training),
        )
    per_process = env_config.get("envs_per_process", 1)
    if per_process < 1:
        raise ConfigError(f"env.envs_per_process={per_process} must be at least 1.")
    processes = env_config.processes if processes is None else processes
    timeout = float(env_config.get("worker_timeout", 60.0))
    constructor = functools.partial(
        make_env,
        env_config.id,
        env_config.max_episode_steps,
        **env_options(env_config, training),
    )
    if not processes:
        return BatchEnv([constructor() for _ in range(num_envs)], blocking=True)
    sizes = [min(per_process, num_envs - start) for start in range(0, num_envs, per_process)]
    workers = []
    try:
        for index, size in enumerate(sizes):
            if per_process == 1:
                target, name = constructor, f"{index}:{env_config.id}"
            else:
                first = index * per_process
                target = functools.partial(make_group, constructor, size)
                name = f"{first}-{first + size - 1}:{env_config.id}"
            workers.append(ExternalProcess(target, name=name, timeout=timeout))
    except BaseException:
        for worker in workers:
            worker.close()
        raise
    if per_process == 1:
        return BatchEnv(workers, blocking=False, timeout=timeout)
    return GroupedBatchEnv(workers, sizes, blocking=False, timeout=timeout)


class EnvSpaces:
    """The spaces and size of a batch whose environments live elsewhere, e.g. with actors.

    Stands in for a batch environment where an algorithm only reads
    `observation_space`, `action_space` and `len()`.
    """

    def __init__(self, env_config, num_envs: int):
        check_env_id(env_config.id)
        env = make_env(env_config.id, env_config.max_episode_steps, **env_options(env_config))
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        env.close()
        self._size = num_envs

    def __len__(self) -> int:
        return self._size

    def close(self) -> None:
        pass


def make_in_graph_env(
    env_config,
    num_envs: int,
    seed: int,
    backend: str | None = None,
    members: int = 1,
    training: bool = True,
    offsets: Sequence[int] | None = None,
):
    """An in-graph batch of `num_envs` environments for `simulate` (of each member).

    Args:
      env_config: the `env` section of a config.
      num_envs: how many environments (for each of `members`).
      seed: environment i starts its random stream from `seed + i` (Gymnasium), or the
        streams of the TensorFlow port are derived from `seed`.
      backend: 'gymnasium' or 'tensorflow'; defaults to `env_config.backend`.
      members: blocks of `num_envs` environments, one per member of a population; on the
        TensorFlow port block m draws as the batch of seed `seed + m` would.
      training: false for evaluation environments (no episodic life on Atari).
      offsets: on the TensorFlow port, block m draws as the batch of seed
        `seed + offsets[m]` would instead (members with listed seeds, `train.seeds`).

    Returns:
      An `InGraphEnv` of `members * num_envs` environments; close it when done.

    Raises:
      ConfigError: `members` > 1 with a TensorFlow environment that cannot seed members.
    """
    # Imported here: environment workers import this module and must not load TensorFlow,
    # whose copy of LLVM crashes Mesa's software renderer (and costs seconds per worker).
    from batchrl.tools.in_graph_batch_env import InGraphBatchEnv

    backend = backend or env_config.backend
    total = members * num_envs
    if backend == "tensorflow":
        env = make_tensorflow_env(
            env_config.id,
            total,
            seed % 2**31,
            env_config.max_episode_steps,
            env_config.get("topologies", ()),
        )
        if members > 1:
            if not hasattr(env, "set_members"):
                raise ConfigError(
                    f"env.id={env_config.id!r} cannot seed the environments of each member "
                    "(it has no set_members); train.population > 1 needs a port of "
                    "batchrl.envs (a ClassicControlEnv)."
                )
            env.set_members(members, offsets)
        return env
    return InGraphBatchEnv(make_batch_env(env_config, total, training=training), seed=seed)


def restart_streams(batch_env, seed: int) -> None:
    """Restarts the random streams of the episodes of `batch_env` from `seed`.

    Gymnasium's environments (an `InGraphBatchEnv`) are reset with seed `seed + i`, which
    seeds the streams of their later episodes; an environment in TensorFlow ops gets the
    seed, and its setter restarts its streams. The runner calls it for the training
    environments after a resume, the train loop for the evaluation ones before each
    evaluation, so that a resumed run evaluates as the uninterrupted one.
    """
    from batchrl.tools.in_graph_batch_env import InGraphBatchEnv  # See make_in_graph_env.

    seed %= 2**31
    if isinstance(batch_env, InGraphBatchEnv):
        batch_env.batch_env.reset(seed=seed)
    elif hasattr(batch_env, "seed"):
        batch_env.seed = seed


def make_tensorflow_env(
    name: str, batch_size: int, seed: int = 0, max_episode_steps: int = 0, topologies=()
):
    """A batch of `batch_size` environments written in TensorFlow ops (`batchrl.envs`).

    Args:
      name: a Gymnasium id of a port, e.g. 'Pendulum-v1', or 'package.module:Class' of
        your own `InGraphEnv`, whose constructor takes `(batch_size, seed=...,
        max_episode_steps=...)`.
      batch_size: the number of environments B.
      seed: the seed of the initial-state streams, in [0, 2**31).
      max_episode_steps: the time limit; 0 keeps the environment's default.
      topologies: routing's `env.topologies`, passed as `topology=[...]` when not empty.

    Raises:
      ConfigError: `name` names no environment.
    """
    constructor = ENVIRONMENTS.resolve(name)
    kwargs = {"seed": seed}
    if max_episode_steps:
        kwargs["max_episode_steps"] = max_episode_steps
    if topologies:
        kwargs["topology"] = list(topologies)
    return constructor(batch_size, **kwargs)


def check_tensorflow_env_id(env_id: str):
    """The class (or function) that builds the environment in TensorFlow ops `env_id`
    names; ConfigError when it names none."""
    try:
        return ENVIRONMENTS.resolve(env_id)
    except ConfigError as error:
        raise ConfigError(
            f"env.id={env_id!r} has no TensorFlow port for env.backend='tensorflow' ({error}); "
            "use env.backend='gymnasium' for Gymnasium's environments."
        ) from None


BACKENDS = ("gymnasium", "tensorflow")
ENGINES = ("gymnasium", "envpool")


def check_env_section(config) -> None:
    """Raises ConfigError on an `env` section no run can step, naming the key.

    The environment's own checks run too: an environment in TensorFlow ops whose class has
    `check_config(env)` checks the keys only it reads (routing's mixed batches check
    `env.topologies`); any other environment takes no `env.topologies`.
    """
    env, train = config.env, config.train
    check_choice("env.backend", env.backend, BACKENDS)
    check_choice("env.engine", env.engine, ENGINES)
    require_positive(env, "env", "num_envs", "envs_per_process", "eval_envs")
    require(env.max_episode_steps >= 0, "env.max_episode_steps", env.max_episode_steps, ">= 0")
    require(env.worker_timeout > 0, "env.worker_timeout", env.worker_timeout, "> 0 seconds")
    topologies = list(env.get("topologies", ()))
    if env.backend == "tensorflow":
        if env.engine != "gymnasium":
            raise ConfigError(
                f"env.engine={env.engine!r} steps Python environments; env.backend="
                "'tensorflow' steps them in TensorFlow ops. Use env.engine='gymnasium' with it."
            )
        own_check = getattr(check_tensorflow_env_id(env.id), "check_config", None)
        if own_check is not None:
            own_check(env)
        elif topologies:
            readers = [name for name in ENVIRONMENTS.names if _has_own_check(name)]
            raise ConfigError(
                f"env.id={env.id!r} takes no env.topologies (got {topologies}): only "
                f"environments that build mixed batches read them ({readers}); set "
                "env.topologies: [] or another env.id."
            )
        if env.eval_on_gymnasium:
            check_env_id(env.id)
    else:
        if topologies:
            raise ConfigError(
                f"env.topologies={topologies} needs env.backend='tensorflow': mixed batches "
                "exist only in TensorFlow ops."
            )
        check_env_id(env.id)
        _check_atari_keys(env)
        if env.engine == "envpool":
            from batchrl.tools.envpool_batch_env import envpool_task

            envpool_task(env.id.rpartition(":")[2])  # Atari, EnvPool installed and has it.
        if train.jit_compile:
            raise ConfigError(
                "train.jit_compile=true needs env.backend='tensorflow': XLA cannot compile the "
                "Python callback that steps Gymnasium environments."
            )
    if train.eval_jit_compile and (
        env.backend != "tensorflow" or (env.eval_on_gymnasium and not train.jit_compile)
    ):
        raise ConfigError(
            "train.eval_jit_compile=true needs evaluations on the TensorFlow port: "
            "env.backend='tensorflow', and env.eval_on_gymnasium=false or "
            f"train.jit_compile=true (got env.backend={env.backend!r}, "
            f"env.eval_on_gymnasium={env.eval_on_gymnasium}, "
            f"train.jit_compile={train.jit_compile})."
        )


def _has_own_check(env_id: str) -> bool:
    """Whether the environment in TensorFlow ops `env_id` checks keys of its own."""
    try:
        return hasattr(ENVIRONMENTS.resolve(env_id), "check_config")
    except ConfigError:  # A registered environment whose package is missing.
        return False


def _check_atari_keys(env) -> None:
    """The keys only Atari games read: refused for other environments, ranges checked."""
    sticky = env.repeat_action_probability
    if not is_atari(env.id.rpartition(":")[2]):
        for key, unset in (
            ("repeat_action_probability", None),
            ("full_action_space", False),
            ("episodic_life", False),
        ):
            if env[key] != unset:
                raise ConfigError(
                    f"env.{key}={env[key]!r} is read by Atari games (ale-py ids such as "
                    f"PongNoFrameskip-v4) only, and env.id={env.id!r} is not one; remove it."
                )
        return
    require(
        sticky is None
        or (isinstance(sticky, (int, float)) and not isinstance(sticky, bool) and 0 <= sticky <= 1),
        "env.repeat_action_probability",
        sticky,
        "~ (the id's own) or a probability in [0, 1]",
    )


SECTION = Section("env", Path(__file__).with_name("env.yaml"), check=check_env_section)
