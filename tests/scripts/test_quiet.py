"""The entry points keep TensorFlow's C++ start-up lines off the terminal."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from batchrl.quiet import is_tensorflow_log_line

# Lines TensorFlow 2.21 printed on import on a machine without a GPU.
NOISE = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795641484.286224    3132 port.cc:153] oneDNN custom operations are on.",
    "I0000 00:00:1795641484.287230    3132 cudart_stub.cc:31] Could not find cuda drivers",
    "I0000 00:00:1795641484.353572    3132 cpu_feature_guard.cc:227] This TensorFlow binary",
    "To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild",
    "E0000 00:00:1795641486.731897    3132 cuda_platform.cc:52] failed call to cuInit: INTERNAL",
    "W1125 21:15:31.123456   42 some/dir/file_name.cc:7] a warning",
]
KEPT = [
    "Logging to runs/pendulum",
    "Traceback (most recent call last):",
    "UserWarning: something in Python",
    "I0000 is not a log line without the rest of the prefix",
]


@pytest.mark.parametrize("line", NOISE)
def test_tensorflow_log_lines_are_recognised(line):
    assert is_tensorflow_log_line(line)


@pytest.mark.parametrize("line", KEPT)
def test_other_lines_are_kept(line):
    assert not is_tensorflow_log_line(line)


def train_debug(logdir, env):
    """Runs the train script on `debug` for 64 steps; its finished process."""
    result = subprocess.run(
        [sys.executable, "-m", "batchrl.scripts.train", "--config=debug",
         f"--logdir={logdir}", "--set", "train.total_steps=64"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.parametrize("level", [None, "3"], ids=["unset", "set_to_3"])
@pytest.mark.slow  # Out of the default suite: 35 s on 2 busy cores (2026-12-06).
def test_the_train_script_prints_no_tensorflow_log_line(tmp_path, level):
    """Also when the user set TF_CPP_MIN_LOG_LEVEL to quiet TensorFlow: no level hides the
    lines TensorFlow prints before its logging is set up."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    if level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = level
    result = train_debug(tmp_path / "run", env)
    lines = result.stderr.splitlines()
    assert lines[0] == f"Logging to {tmp_path / 'run'}", result.stderr
    assert lines[1].startswith("Devices: CPU"), result.stderr
    noise = [line for line in lines if is_tensorflow_log_line(line) or "cuda" in line.lower()]
    assert not noise, result.stderr


@pytest.mark.slow  # Out of the default suite: 16 s on 2 busy cores (2026-12-06).
def test_a_user_setting_shows_the_lines_again(tmp_path):
    """TF_CPP_MIN_LOG_LEVEL=0 set by the user: every line of TensorFlow's shows."""
    result = train_debug(tmp_path / "run", dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0"))
    assert any(is_tensorflow_log_line(line) for line in result.stderr.splitlines())


@pytest.mark.slow  # A pytest session of its own with two workers: about 15 s.
def test_the_test_suite_prints_no_tensorflow_log_line_after_its_summary():
    """With pytest-xdist, the main process's output while the conftest imports TensorFlow
    is written out after the summary; the conftest imports it quietly."""
    root = Path(__file__).parents[2]
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider",
         "tests/test_conftest.py", "-k", "ray_cluster"],
        cwd=root, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    lines = (result.stdout + result.stderr).splitlines()
    assert not [line for line in lines if is_tensorflow_log_line(line)], lines
