"""Records episodes of a Gymnasium environment to MP4 or GIF videos, without a display."""

from __future__ import annotations

import ctypes.util
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import imageio.v2
import imageio.v3
import numpy as np

FORMATS = ("mp4", "gif")
# GIF stores frame times in hundredths of a second, and browsers play frames shorter than
# two of them at ten: GIFs keep every k-th frame to stay at or below 50 frames a second.
GIF_MAX_FPS = 50
OFFSCREEN_PACKAGES = {
    "egl": "libegl1 libegl-mesa0 libgl1-mesa-dri libopengl0",
    "osmesa": "libosmesa6",
}


class RenderError(RuntimeError):
    """An environment that cannot render frames here, with a hint how to fix it."""


def configure_offscreen_rendering() -> str:
    """Lets Gymnasium render to arrays on a machine without a display.

    MuJoCo picks its OpenGL backend from the environment variable MUJOCO_GL when it is
    first imported, so call this before making a MuJoCo environment. Without MUJOCO_GL,
    it picks EGL when libEGL is installed (a GPU's driver, or Mesa's software renderer
    on a machine without one), else OSMesa. A MUJOCO_GL that is already set is kept.
    pygame, which draws the classic-control environments, gets SDL's dummy video driver
    unless SDL_VIDEODRIVER is set, so that it does not look for a display.

    Render in a process that has not imported TensorFlow, such as an `ExternalProcess`
    (which inherits these variables): Mesa's software renderer calls LLVM, binds to the
    copy of LLVM that TensorFlow exports, and crashes.

    Returns:
      The value of MUJOCO_GL.
    """
    if "MUJOCO_GL" not in os.environ:
        os.environ["MUJOCO_GL"] = "egl" if ctypes.util.find_library("EGL") else "osmesa"
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    return os.environ["MUJOCO_GL"]


def offscreen_help() -> str:
    """What MuJoCo's offscreen rendering needs, for error messages."""
    needs = "; ".join(
        f"MUJOCO_GL={name} needs Debian's {packages}"
        for name, packages in OFFSCREEN_PACKAGES.items()
    )
    return f"MuJoCo renders offscreen with MUJOCO_GL={os.environ.get('MUJOCO_GL')!r} ({needs})."


class VideoWriter:
    """Writes RGB frames [H, W, 3] uint8, one at a time, to an MP4 or GIF file.

    MP4 is H.264 (yuv420p) through the ffmpeg that imageio-ffmpeg bundles, with every
    frame at `fps`; a frame of odd height or width gets its last row or column repeated,
    since H.264 needs even sizes. GIF keeps frames 0, k, 2k, ... with
    k = ceil(fps / GIF_MAX_FPS), each shown for round(100 k / fps) hundredths of a
    second, and holds its frames in memory until `close`.

    Attributes:
      path: the video file.
      frames: the number of frames written so far.
    """

    def __init__(self, path: str | Path, fps: float):
        """Opens the file; its suffix, .mp4 or .gif, picks the format.

        Raises:
          ValueError: on another suffix or a non-positive `fps`.
        """
        self.path = Path(path)
        video_format = self.path.suffix.lower().lstrip(".")
        if video_format not in FORMATS:
            raise ValueError(f"Unsupported video {self.path}; valid suffixes are {FORMATS}.")
        if not fps > 0:
            raise ValueError(f"fps={fps} must be positive.")
        self.frames = 0
        self._offered = 0
        self._pad = video_format == "mp4"
        if video_format == "mp4":
            self._every = 1
            self._writer = imageio.v2.get_writer(
                self.path, format="FFMPEG", fps=fps, codec="libx264", macro_block_size=1
            )
            self._write = self._writer.append_data
        else:
            self._every = math.ceil(fps / GIF_MAX_FPS)
            centiseconds = max(2, round(100 * self._every / fps))
            self._writer = imageio.v3.imopen(self.path, "w", plugin="pillow")
            self._write = lambda frame: self._writer.write(
                frame, is_batch=False, duration=10 * centiseconds, loop=0
            )

    def append(self, frame: np.ndarray) -> None:
        """Adds one frame [H, W, 3] uint8 (GIF drops it unless its index is a multiple of k)."""
        frame = np.asarray(frame)
        if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[-1] != 3:
            raise ValueError(f"A frame must be uint8 [H, W, 3], got {frame.dtype} {frame.shape}.")
        index, self._offered = self._offered, self._offered + 1
        if index % self._every:
            return
        if self._pad and (frame.shape[0] % 2 or frame.shape[1] % 2):
            pad = ((0, frame.shape[0] % 2), (0, frame.shape[1] % 2), (0, 0))
            frame = np.pad(frame, pad, mode="edge")
        self._write(frame)
        self.frames += 1

    def close(self) -> None:
        """Finishes the file."""
        self._writer.close()

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def render(env) -> np.ndarray:
    """The frame [H, W, 3] uint8 of an environment made with render_mode='rgb_array'.

    Raises:
      RenderError: the environment cannot render here; the message says what MuJoCo's
        offscreen rendering needs.
    """
    try:
        frame = env.render()
    except Exception as error:
        raise RenderError(f"The environment cannot render: {error} {offscreen_help()}") from error
    if frame is None:
        raise RenderError(
            "The environment rendered no frame: make it with render_mode='rgb_array'."
        )
    return frame


def record_episode(
    env,
    policy: Callable[[np.ndarray], Any],
    writer: VideoWriter,
    max_steps: int = 0,
    seed: int | None = None,
) -> tuple[float, int]:
    """Runs one episode and writes the frame after the reset and after every step.

    An episode of length L thus offers L + 1 frames to `writer`.

    Args:
      env: a Gymnasium environment made with render_mode='rgb_array'.
      policy: maps one observation to one action; its `reset()`, if it has one, is
        called first (a recurrent policy clears its state there), and its
        `observe_reward(reward)`, if it has one, after each step.
      writer: receives the frames.
      max_steps: ends the episode after this many steps; 0 waits for termination or the
        environment's time limit.
      seed: seed of the reset; None continues the environment's random stream.

    Returns:
      The undiscounted return and the length of the episode.
    """
    observ, _ = env.reset(seed=seed)
    if hasattr(policy, "reset"):
        policy.reset()
    writer.append(render(env))
    total, length, done = 0.0, 0, False
    while not done and not (max_steps and length >= max_steps):
        observ, reward, terminated, truncated, _ = env.step(policy(observ))
        if hasattr(policy, "observe_reward"):  # A recurrent policy that reads rewards.
            policy.observe_reward(float(reward))
        total += float(reward)
        length += 1
        done = terminated or truncated
        writer.append(render(env))
    return total, length
