"""bench/plots.py: the statistics its curves draw, on hand-made runs."""

import importlib.util
from pathlib import Path

import numpy as np

BENCH = Path(__file__).parents[2] / "bench"


def load_plots():
    spec = importlib.util.spec_from_file_location("plots", BENCH / "plots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_iqm_drops_the_lowest_and_highest_quarter_as_trim_mean_does():
    plots = load_plots()
    # n = 5: k = 1, so the mean of the middle three of the sorted 1, 2, 3, 4, 100.
    assert plots.iqm(np.array([100.0, 1.0, 3.0, 2.0, 4.0])) == 3.0
    # n = 4: k = 1, the mean of 2 and 3.
    assert plots.iqm(np.array([[4.0], [1.0], [3.0], [2.0]]))[0] == 2.5


def test_the_band_holds_the_iqm_and_is_a_point_when_every_run_is_equal():
    plots = load_plots()
    runs = np.array([[1.0, 5.0], [2.0, 5.0], [3.0, 5.0], [4.0, 5.0], [9.0, 5.0]])  # [N, T]
    middle, low, high = plots.iqm_band(runs)
    assert middle.tolist() == [3.0, 5.0]
    assert low[0] <= middle[0] <= high[0] and low[0] < high[0]
    assert low[1] == high[1] == 5.0


def test_a_run_is_carried_forward_past_its_last_evaluation():
    plots = load_plots()
    evals = [[100, 1.0, -900.0], [200, 2.0, -150.0]]  # [step, seconds, return]
    grid = np.array([50.0, 100.0, 150.0, 200.0, 400.0])
    got = plots.on_grid(evals, grid)
    assert np.isnan(got[0])  # Before its first evaluation.
    assert got[1:].tolist() == [-900.0, -900.0, -150.0, -150.0]
