"""The README's custom-algorithm example runs and learns CartPole."""

import importlib.util
from pathlib import Path

import numpy as np

EXAMPLE = Path(__file__).parents[2] / "examples" / "reinforce.py"


def test_reinforce_example_learns():
    spec = importlib.util.spec_from_file_location("reinforce_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    returns = module.main(total_steps=60_000)
    # A random policy averages about 22 on CartPole-v1.
    assert np.mean(returns[:5]) < 60
    assert np.mean(returns[-10:]) >= 100, returns[-10:]
