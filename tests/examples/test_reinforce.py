"""The README's custom-algorithm example: it learns CartPole, alone and through the train script."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

EXAMPLES = Path(__file__).parents[2] / "examples"
PACKAGE = EXAMPLES / "reinforce"  # A package of its own: pyproject.toml and reinforce.py.
EXAMPLE = PACKAGE / "reinforce.py"


@pytest.mark.slow  # A long learning run: .ci/run's second stage.
def test_reinforce_example_learns():
    """Seeds 0 to 4 go from 23 to 28 (the first 5 calls) to 459, 343, 350, 375 and 237 (the
    last 10) in 60k steps, about 5 s a seed; 4 of 5 must pass 100."""
    spec = importlib.util.spec_from_file_location("reinforce_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    learned = 0
    for seed in range(5):
        returns = module.main(total_steps=60_000, seed=seed)
        # A random policy averages about 22 on CartPole-v1.
        assert np.mean(returns[:5]) < 60, (seed, returns[:5])
        learned += np.mean(returns[-10:]) >= 100
    assert learned >= 4, learned


def scalars(folder, tag):
    values = []
    for path in sorted(Path(folder).glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            values += [
                float(tf.make_ndarray(v.tensor)) for v in event.summary.value if v.tag == tag
            ]
    return values


@pytest.mark.slow  # 9 to 12 s; moved out of the default suite's 15 minutes.
def test_train_script_trains_the_example_by_entry_point(tmp_path):
    """`algorithm.name=reinforce:Reinforce`, its own section, evaluation and export."""
    command = [
        sys.executable,
        "-m",
        "batchrl.scripts.train",
        "--config=cartpole",
        f"--logdir={tmp_path / 'run'}",
        "--set",
        "algorithm.name=reinforce:Reinforce",
        "--set",
        "reinforce.learning_rate=3e-3",
        "--set",
        "train.total_steps=40000",
        "--set",
        "train.steps_per_call=100",
        "--set",
        "train.eval_every=0",
    ]
    env = dict(os.environ, PYTHONPATH=str(PACKAGE), TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    config = (tmp_path / "run" / "config.yaml").read_text()
    assert "name: reinforce:Reinforce" in config and "learning_rate: 0.003" in config
    returns = scalars(tmp_path / "run" / "train", "simulate/mean_return")
    # From about 22 (random actions) to several times that in 40k steps.
    assert np.mean(returns[:3]) < 40 and np.mean(returns[-3:]) > 60, returns
    assert (tmp_path / "run" / "policy" / "saved_model.pb").exists()


def test_installed_package_registers_by_entry_point_and_its_section_is_checked(tmp_path):
    """`pip install` of examples/reinforce declares `reinforce` in the entry-point group
    batchrl.algorithms: a config names it so, its section's defaults come from the
    class, and a bad value of its own key is refused at load, naming the key; nothing
    under batchrl/ names it."""
    site = tmp_path / "site"
    install = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
    install += ["--no-build-isolation", "--no-index", "--target", str(site), str(PACKAGE)]
    done = subprocess.run(install, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "batchrl.algorithms" in next(site.glob("*.dist-info/entry_points.txt")).read_text()
    env = dict(os.environ, PYTHONPATH=str(site), TF_CPP_MIN_LOG_LEVEL="3")
    probe = (
        "from batchrl.config import ALGORITHMS, load_run_config\n"
        "assert ALGORITHMS.is_registered('reinforce'), ALGORITHMS.names\n"
        "config = load_run_config('cartpole', ['algorithm.name=reinforce'])\n"
        "print(dict(config.reinforce))\n"
        "try:\n"
        "    load_run_config('cartpole', ['algorithm.name=reinforce', 'reinforce.discount=1.5'])\n"
        "except Exception as error:\n"
        "    print(type(error).__name__, error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    defaults, refusal = done.stdout.strip().splitlines()[-2:]
    assert defaults == "{'learning_rate': 0.002, 'discount': 0.99, 'max_length': 500}"
    assert refusal == "ConfigError Invalid reinforce.discount=1.5; it must be in [0, 1]."
