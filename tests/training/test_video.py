"""Tests of the video writer and the choice of MuJoCo's offscreen backend."""

import imageio.v3 as iio
import numpy as np
import pytest

from batchrl.training import video


def gray(value, shape=(17, 33)):
    return np.full(shape + (3,), value, np.uint8)


def test_mp4_keeps_every_frame_and_pads_odd_sizes_to_even(tmp_path):
    path = tmp_path / "clip.mp4"
    with video.VideoWriter(path, fps=30) as writer:
        for index in range(5):
            writer.append(gray(40 * index))
    assert writer.frames == 5
    frames = np.stack(list(iio.imiter(path, plugin="FFMPEG")))
    assert frames.shape == (5, 18, 34, 3)  # 17 x 33, one row and one column repeated.
    np.testing.assert_allclose(frames.mean(axis=(1, 2, 3)), [0, 40, 80, 120, 160], atol=3)


def test_gif_keeps_every_kth_frame_at_most_50_per_second(tmp_path):
    path = tmp_path / "clip.gif"
    # 125 frames per second (Hopper-v5): k = ceil(125 / 50) = 3, so of frames 0..9 the
    # GIF keeps 0, 3, 6 and 9, each for round(100 * 3 / 125) = 2 hundredths of a second.
    with video.VideoWriter(path, fps=125) as writer:
        for index in range(10):
            writer.append(gray(20 * index))
    assert writer.frames == 4
    frames = iio.imread(path, index=None)
    assert frames.shape == (4, 17, 33, 3)
    np.testing.assert_array_equal(frames[:, 0, 0, 0], [0, 60, 120, 180])
    assert iio.immeta(path, index=0)["duration"] == 20


def test_bad_files_and_frames_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="valid suffixes are"):
        video.VideoWriter(tmp_path / "clip.avi", fps=30)
    with pytest.raises(ValueError, match="must be positive"):
        video.VideoWriter(tmp_path / "clip.gif", fps=0)
    with video.VideoWriter(tmp_path / "clip.gif", fps=30) as writer:
        with pytest.raises(ValueError, match=r"uint8 \[H, W, 3\]"):
            writer.append(np.zeros((4, 4, 3), np.float32))
        writer.append(gray(0))


@pytest.fixture
def environ(monkeypatch):
    """MUJOCO_GL and SDL_VIDEODRIVER unset during the test and restored after it."""
    for name in ("MUJOCO_GL", "SDL_VIDEODRIVER"):
        monkeypatch.setenv(name, "")  # Records the value to restore, or its absence.
        monkeypatch.delenv(name)
    return monkeypatch


def test_offscreen_backend_keeps_the_users_choice(environ):
    environ.setenv("MUJOCO_GL", "osmesa")
    environ.setenv("SDL_VIDEODRIVER", "x11")
    assert video.configure_offscreen_rendering() == "osmesa"
    assert video.os.environ["SDL_VIDEODRIVER"] == "x11"


@pytest.mark.parametrize("egl, expected", [("libEGL.so.1", "egl"), (None, "osmesa")])
def test_offscreen_backend_is_egl_when_installed_else_osmesa(environ, egl, expected):
    environ.setattr(video.ctypes.util, "find_library", lambda name: egl)
    assert video.configure_offscreen_rendering() == expected
    assert video.os.environ["MUJOCO_GL"] == expected
    assert video.os.environ["SDL_VIDEODRIVER"] == "dummy"
