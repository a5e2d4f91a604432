"""`pip install .` (not editable) gives a package whose train command works anywhere."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # Out of the default suite: 22 s on 2 busy cores (2026-12-06).
def test_a_non_editable_install_trains_debug_from_another_folder(tmp_path):
    """The configs are package data: the installed package needs nothing from the repository."""
    wheels, site, work = tmp_path / "wheels", tmp_path / "site", tmp_path / "work"
    work.mkdir()
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", wheels, ROOT], check=True, timeout=300)
    (wheel,) = wheels.glob("batchrl-*.whl")
    # Dependencies come from this interpreter's environment; batchrl only from the wheel.
    subprocess.run([*pip, "install", "--no-deps", "--target", site, wheel], check=True)
    env = dict(os.environ, PYTHONPATH=str(site), TF_CPP_MIN_LOG_LEVEL="3")
    where = subprocess.run(
        [sys.executable, "-c", "import batchrl; print(batchrl.__file__)"],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        check=True,
    ).stdout
    assert where.startswith(str(site)), where
    result = subprocess.run(
        [sys.executable, "-m", "batchrl.scripts.train", "--config=debug", "--logdir=run"],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (work / "run" / "policy" / "saved_model.pb").exists()
