"""End-to-end tests of the visualize script: videos of trained runs, errors, the configs."""

import os
import shutil
import subprocess
import sys

import imageio.v3 as iio
import numpy as np
import pytest
import tensorflow as tf

from batchrl.config import default_config_dir, load_run_config
from batchrl.config.run_config import check_run_config
from batchrl.runners import train
from batchrl.scripts import visualize as visualize_script
from batchrl.tools.environments import check_env_id, make_env, make_tensorflow_env
from batchrl.training.video import OFFSCREEN_PACKAGES as PACKAGES

# Pendulum-v1 renders 500 x 500 frames at 30 per second, CartPole-v1 600 x 400 at 50 and
# MuJoCo's Reacher-v5 480 x 480 at 50. An episode of length L gives L + 1 frames: one
# after the reset and one after every step.
PENDULUM_FRAME = (500, 500, 3)
CARTPOLE_FRAME = (400, 600, 3)
REACHER_FRAME = (480, 480, 3)


def quiet(*_, **__):
    pass


def train_run(logdir, env_id, episode_steps):
    overrides = [
        f"env.id={env_id}",
        f"env.max_episode_steps={episode_steps}",
        "train.total_steps=64",
        "train.eval_every=0",
    ]
    train(load_run_config("debug", overrides), logdir, progress=quiet)
    return logdir


@pytest.fixture(scope="module")
def pendulum_run(tmp_path_factory):
    """A debug run on Pendulum-v1 with episodes of 20 steps, checkpointed at step 64."""
    return train_run(tmp_path_factory.mktemp("pendulum"), "Pendulum-v1", 20)


@pytest.fixture(autouse=True)
def environ(monkeypatch):
    """MUJOCO_GL and SDL_VIDEODRIVER, which visualize sets in this process, unset during
    the test (so it picks the default backend) and restored after it."""
    for name in ("MUJOCO_GL", "SDL_VIDEODRIVER"):
        monkeypatch.setenv(name, "")  # Records the value to restore, or its absence.
        monkeypatch.delenv(name)
    return monkeypatch


def run_main(args):
    try:
        return visualize_script.main([str(arg) for arg in args])
    except SystemExit as exit:  # argparse rejects arguments with exit code 2.
        return exit.code


def decode(path):
    return np.stack(list(iio.imiter(path, plugin="FFMPEG")))


def test_mp4_per_episode_with_the_checkpointed_policy(
    pendulum_run, tmp_path, capsys, no_new_children
):
    outdir = tmp_path / "videos"
    assert run_main(["--logdir", pendulum_run, "--outdir", outdir, "--episodes=2"]) == 0
    assert sorted(path.name for path in outdir.iterdir()) == ["episode-000.mp4", "episode-001.mp4"]
    for path in outdir.iterdir():
        frames = decode(path)
        assert frames.shape == (21,) + PENDULUM_FRAME  # Time limit 20: 20 steps + 1.
        assert np.abs(frames[0].astype(int) - frames[-1]).max() > 100  # The pendulum moved.
    out = capsys.readouterr().out
    assert "(step 64)" in out
    assert "Episode 0: return" in out and "length 20, 21 frames" in out
    assert "Episode 1: return" in out and "Mean return" in out
    # The first episode, replayed with the exported policy on the same seed.
    policy = tf.saved_model.load(str(pendulum_run / "policy"))
    env = make_env("Pendulum-v1", 20)
    observ, _ = env.reset(seed=0)
    expected, done = 0.0, False
    while not done:
        action = policy(observ[None].astype(np.float32)).numpy()[0]
        observ, reward, terminated, truncated, _ = env.step(action)
        expected += reward
        done = terminated or truncated
    printed = float(out.split("Episode 0: return ")[1].split(",")[0])
    assert printed == pytest.approx(expected, abs=0.01)


def test_gif_and_max_steps_with_a_discrete_policy(tmp_path):
    logdir = train_run(tmp_path / "run", "CartPole-v1", 0)
    outdir = tmp_path / "gifs"
    results = visualize_script.visualize(
        logdir, outdir, episodes=2, video_format="gif", max_steps=5, log=quiet
    )
    # No pole falls within 5 steps (0.1 s) of an upright start.
    assert [(r["length"], r["frames"]) for r in results] == [(5, 6), (5, 6)]
    path = outdir / "episode-001.gif"
    assert results[1]["path"] == path
    assert iio.imread(path, index=None).shape == (6,) + CARTPOLE_FRAME
    # 50 frames per second: each frame shows for 2 hundredths of a second.
    assert iio.immeta(path, index=0)["duration"] == 20


@pytest.fixture(scope="module")
def reacher_run(tmp_path_factory):
    """A debug run on MuJoCo's Reacher-v5 with episodes of 8 steps."""
    return train_run(tmp_path_factory.mktemp("reacher"), "Reacher-v5", 8)


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param(
            None,  # EGL, as libEGL is installed.
            marks=pytest.mark.needs_libraries(["EGL", "EGL_mesa", "OpenGL"], PACKAGES["egl"]),
        ),
        pytest.param("osmesa", marks=pytest.mark.needs_libraries(["OSMesa"], PACKAGES["osmesa"])),
    ],
)
@pytest.mark.slow  # Out of the default suite: 18 s on 2 busy cores (2026-12-06).
def test_mujoco_renders_offscreen(reacher_run, tmp_path, capsys, environ, backend):
    """The default backend from a fresh command line; OSMesa through main()."""
    args = [f"--logdir={reacher_run}", f"--outdir={tmp_path}", "--episodes=1"]
    if backend is None:
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
        env.pop("MUJOCO_GL", None)
        command = [sys.executable, "-m", "batchrl.scripts.visualize"] + args
        result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
        assert result.returncode == 0, result.stderr[-3000:]
        out = result.stdout
    else:
        environ.setenv("MUJOCO_GL", backend)
        assert run_main(args) == 0
        out = capsys.readouterr().out
    assert "Episode 0: return" in out and "length 8, 9 frames" in out
    frames = decode(tmp_path / "episode-000.mp4")
    assert frames.shape == (9,) + REACHER_FRAME
    assert frames[0].std() > 10  # Not a blank image.


def test_logdir_without_config(tmp_path, capsys):
    assert run_main([f"--logdir={tmp_path}", f"--outdir={tmp_path / 'out'}"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'config.yaml'} does not exist" in err


def test_logdir_without_checkpoint(pendulum_run, tmp_path, capsys):
    shutil.copy(pendulum_run / "config.yaml", tmp_path / "config.yaml")
    assert run_main([f"--logdir={tmp_path}", f"--outdir={tmp_path / 'out'}"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'checkpoints'} holds no checkpoint" in err
    assert not (tmp_path / "out").exists()


def test_missing_checkpoint_argument(pendulum_run, tmp_path, capsys):
    missing = pendulum_run / "checkpoints" / "ckpt-999"
    args = [f"--logdir={pendulum_run}", f"--outdir={tmp_path}", f"--checkpoint={missing}"]
    assert run_main(args) == 2
    assert f"{missing}.index does not exist" in capsys.readouterr().err


def test_checkpoint_of_another_model(pendulum_run, reacher_run, tmp_path, capsys):
    other = reacher_run / "checkpoints"
    args = [f"--logdir={pendulum_run}", f"--outdir={tmp_path}", f"--checkpoint={other}"]
    assert run_main(args) == 2
    assert "does not hold the ppo of this run's config" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flag, message",
    [
        ("--episodes=0", "--episodes: must be at least 1, got 0"),
        ("--episodes=two", "--episodes: must be an integer, got 'two'"),
        ("--max-steps=-1", "--max-steps: must be at least 0, got -1"),
        ("--format=avi", "--format: invalid choice: 'avi'"),
    ],
)
def test_bad_arguments(pendulum_run, tmp_path, capsys, flag, message):
    assert run_main([f"--logdir={pendulum_run}", f"--outdir={tmp_path}", flag]) == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_every_config_loads_and_makes_its_environment():
    names = sorted(path.stem for path in default_config_dir().glob("*.yaml"))
    assert {"reacher", "hopper", "cheetah", "walker", "ant", "humanoid"} <= set(names)
    assert {"halfcheetah_sac", "hopper_sac", "walker_sac", "breakout_minatar_dqn"} <= set(names)
    for name in names:
        config = load_run_config(name)
        check_run_config(config)
        if config.env.topologies:  # A mixed routing batch exists only in TensorFlow ops.
            env = make_tensorflow_env(config.env.id, 2, topologies=config.env.topologies)
            assert env.observation_space.shape, name
            continue
        check_env_id(config.env.id)
        env = make_env(config.env.id, config.env.max_episode_steps)
        assert env.observation_space.shape, name
        env.close()
