"""Renders episodes of a trained policy to videos: `python -m batchrl.scripts.visualize`."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
from collections.abc import Callable
from pathlib import Path

from batchrl.quiet import import_tensorflow

tf = import_tensorflow()  # Before anything imports TensorFlow, to hide its C++ log lines.

import gymnasium as gym
import numpy as np

from batchrl.config import Config, ConfigError
from batchrl.config.run_config import load_saved_run_config
from batchrl.runners.train import make_algorithm
from batchrl.tools.environments import env_options, make_env
from batchrl.tools.external_process import ExternalProcess, ExternalProcessError
from batchrl.tools.in_graph_env import observ_dtype
from batchrl.training.video import (
    FORMATS,
    RenderError,
    VideoWriter,
    configure_offscreen_rendering,
    offscreen_help,
    record_episode,
)


@dataclasses.dataclass(frozen=True)
class _BatchSpec:
    """What an algorithm reads of its batch environment when it is built."""

    size: int
    observation_space: gym.Space
    action_space: gym.Space

    def __len__(self) -> int:
        return self.size


def find_checkpoint(logdir: str | Path, checkpoint: str | Path | None = None) -> str:
    """The checkpoint to load: `checkpoint` itself, the latest in it, or the run's latest.

    Args:
      logdir: the run's folder.
      checkpoint: a checkpoint prefix such as `<logdir>/checkpoints/ckpt-100000`, or a
        folder of checkpoints; None takes the latest in `<logdir>/checkpoints`.

    Raises:
      FileNotFoundError: there is no such checkpoint.
    """
    if checkpoint is None:
        folder = Path(logdir) / "checkpoints"
        latest = tf.train.latest_checkpoint(str(folder))
        if latest is None:
            raise FileNotFoundError(
                f"{folder} holds no checkpoint: the run in {logdir} has not saved one yet "
                "(train.checkpoint_every), or pass --checkpoint."
            )
        return latest
    if Path(checkpoint).is_dir():
        latest = tf.train.latest_checkpoint(str(checkpoint))
        if latest is None:
            raise FileNotFoundError(f"--checkpoint={checkpoint} is a folder with no checkpoint.")
        return latest
    if not Path(f"{checkpoint}.index").is_file():
        raise FileNotFoundError(
            f"--checkpoint={checkpoint} is not a checkpoint: {checkpoint}.index does not exist."
        )
    return str(checkpoint)


def load_policy(
    config: Config,
    checkpoint: str,
    observation_space: gym.spaces.Box,
    action_space: gym.Space,
) -> tuple[Callable[[np.ndarray], object], int]:
    """The deterministic policy saved in `checkpoint`, for one observation at a time.

    The algorithm is built as `train` builds it, for `config.env.num_envs` environments,
    so that every variable has the shape it was saved with; then the checkpoint is
    restored into it. The policy acts with `algo.act(observ, deterministic=True)`: the
    mode of its distribution, after the observation normalization it learned.

    Args:
      config: the run's resolved config.
      checkpoint: a checkpoint prefix written by `train`.
      observation_space: the Box space of one observation.
      action_space: the Box or Discrete space of one action.

    Returns:
      A function from one observation to one action, and the step of the checkpoint.

    Raises:
      ConfigError: the checkpoint does not hold the algorithm of `config`.
    """
    spec = _BatchSpec(config.env.num_envs, observation_space, action_space)
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
    algo = make_algorithm(config, spec, step)
    try:
        status = tf.train.Checkpoint(step=step, algo=algo).restore(checkpoint)
        status.expect_partial().assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.OpError) as error:
        raise ConfigError(
            f"{checkpoint} does not hold the {config.algorithm.name} of this run's config: {error}"
        ) from None
    dtype = observ_dtype(observation_space)
    observ_spec = tf.TensorSpec(observation_space.shape, dtype)

    def convert(action):
        if isinstance(action_space, gym.spaces.Discrete):
            return int(action)
        return action.astype(action_space.dtype)

    if getattr(algo, "recurrent", False):
        return _RecurrentPolicy(algo, observ_spec, convert), int(step)
    act = tf.function(
        lambda observ: algo.act(observ[None], deterministic=True)[0],
        input_signature=[observ_spec],
    )
    return (lambda observ: convert(act(np.asarray(observ, dtype.as_numpy_dtype)).numpy())), int(
        step
    )


class _RecurrentPolicy:
    """One observation at a time with a recurrent policy's state; `reset` starts an episode,
    `observe_reward` gives the state each step's reward."""

    def __init__(self, algo, observ_spec, convert):
        state_spec = tf.TensorSpec([1, algo.initial_state(1).shape[-1]], tf.float32)
        self._act = tf.function(
            lambda observ, state: algo.act_recurrent(observ[None], state, deterministic=True),
            input_signature=[observ_spec, state_spec],
        )
        self._observe = tf.function(
            algo.observe_reward, input_signature=[state_spec, tf.TensorSpec([1], tf.float32)]
        )
        self._initial = algo.initial_state(1)
        self._convert = convert
        self.reset()

    def reset(self):
        self._state = self._initial

    def __call__(self, observ):
        action, self._state = self._act(np.asarray(observ, np.float32), self._state)
        return self._convert(action[0].numpy())

    def observe_reward(self, reward: float) -> None:
        self._state = self._observe(self._state, np.array([reward], np.float32))


def visualize(
    logdir: str | Path,
    outdir: str | Path,
    episodes: int = 3,
    checkpoint: str | Path | None = None,
    video_format: str = "mp4",
    max_steps: int = 0,
    seed: int = 0,
    log=None,
) -> list[dict]:
    """Records `episodes` episodes of the run's policy, one video each.

    The policy comes from the run's latest checkpoint (or `checkpoint`), so this works
    while the run is still training; see `load_policy`. The episodes run on the
    Gymnasium environment of the run's config, with its time limit, in a worker process.

    Args:
      logdir: the run's folder, with `config.yaml` and `checkpoints/`.
      outdir: the folder for `episode-000.<format>`, `episode-001.<format>`, ...
      episodes: how many episodes.
      checkpoint: see `find_checkpoint`.
      video_format: 'mp4' or 'gif'; see `VideoWriter`.
      max_steps: ends each episode after this many steps; 0 keeps the time limit only.
      seed: the first episode resets with this seed; the next ones continue its stream.
      log: callable receiving a line after loading and after each episode; None prints
        to stderr.

    Returns:
      For each episode: `return`, `length`, `path` and `frames` (written to the video).

    Raises:
      FileNotFoundError: `logdir` has no config.yaml, or there is no checkpoint.
      ConfigError: the config or checkpoint does not fit this version of batchrl.
      ValueError: `episodes`, `max_steps` or `video_format` are out of range.
      RenderError: the environment cannot render on this machine.
    """
    if episodes < 1 or max_steps < 0 or video_format not in FORMATS:
        raise ValueError(
            f"Need episodes >= 1, max_steps >= 0 and a format in {FORMATS}; got "
            f"{episodes}, {max_steps} and {video_format!r}."
        )
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    logdir, outdir = Path(logdir), Path(outdir)
    path = logdir / "config.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: is {logdir} the logdir of a run?")
    config = load_saved_run_config(path)
    checkpoint = find_checkpoint(logdir, checkpoint)
    configure_offscreen_rendering()  # The worker inherits MUJOCO_GL and imports MuJoCo.
    # The environment renders in a worker process without TensorFlow: Mesa's software
    # OpenGL (llvmpipe, for MuJoCo) calls LLVM, and finds the copy of LLVM that TensorFlow
    # exports, which crashes the process.
    constructor = functools.partial(
        make_env,
        config.env.id,
        config.env.max_episode_steps,
        render_mode="rgb_array",
        **env_options(config.env, training=False),
    )
    try:
        env = ExternalProcess(constructor, name=f"render:{config.env.id}")
    except ExternalProcessError as error:
        raise RenderError(
            f"Cannot make {config.env.id} with render_mode='rgb_array': {error} {offscreen_help()}"
        ) from error
    try:
        policy, step = load_policy(config, checkpoint, env.observation_space, env.action_space)
        log(f"Loaded {checkpoint} (step {step:,}) for {config.env.id}.")
        fps = env.metadata.get("render_fps") or 30
        outdir.mkdir(parents=True, exist_ok=True)
        results = []
        for index in range(episodes):
            video = outdir / f"episode-{index:03d}.{video_format}"
            with VideoWriter(video, fps) as writer:
                episode_seed = seed if index == 0 else None
                total, length = record_episode(env, policy, writer, max_steps, episode_seed)
            results.append(
                {"return": total, "length": length, "path": video, "frames": writer.frames}
            )
            log(
                f"Episode {index}: return {total:.2f}, length {length}, "
                f"{writer.frames} frames in {video}."
            )
        return results
    finally:
        env.close()


def _at_least(minimum: int):
    """An argparse type for integers of at least `minimum`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--logdir", required=True, help="the run's folder, as given to train")
    parser.add_argument("--outdir", required=True, help="folder for episode-000.mp4, ...")
    parser.add_argument("--episodes", type=_at_least(1), default=3, help="default: 3")
    parser.add_argument(
        "--checkpoint", default=None, help="a checkpoint prefix or folder; default: the latest"
    )
    parser.add_argument("--format", choices=FORMATS, default="mp4", dest="video_format")
    parser.add_argument(
        "--max-steps",
        type=_at_least(0),
        default=0,
        help="end each episode after this many steps; default 0: the time limit",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the first episode")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        results = visualize(
            args.logdir,
            args.outdir,
            args.episodes,
            args.checkpoint,
            args.video_format,
            args.max_steps,
            args.seed,
            log=functools.partial(print, flush=True),
        )
    except (FileNotFoundError, ConfigError) as error:
        print(f"Error: {error}", file=sys.stderr)
        return 2
    except RenderError as error:
        print(f"Rendering error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    returns = [result["return"] for result in results]
    print(f"Mean return {np.mean(returns):.2f} of {len(returns)} episode(s).", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
