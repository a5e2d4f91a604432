"""bench/routing_speedup.py: the routing paper's V-B rule on hand-made logs."""

import importlib.util
from pathlib import Path

import pytest

PATH = Path(__file__).parents[2] / "bench" / "routing_speedup.py"
spec = importlib.util.spec_from_file_location("routing_speedup", PATH)
speedup = importlib.util.module_from_spec(spec)
spec.loader.exec_module(speedup)


def log(config, means, seconds_per_eval):
    rows = [[i, 0, i * seconds_per_eval, mean, 0.1] for i, mean in enumerate(means)]
    return {"config": config, "seed": 0, "path": config, "evals": rows}


def test_converged_reward_times_and_speedup():
    # PPO: 10 rising evaluations, then 50 alternating 26 and 28 (mean 27); 10 s apart.
    ppo = log("ppo", [20.0 + i * 0.5 for i in range(10)] + [26.0, 28.0] * 25, 10.0)
    es = log("es", [20.0, 24.0, 26.9, 27.0, 27.5], 100.0)  # 27 first at 300 s.
    row = speedup.compare(ppo, es)
    assert row["converged"] == pytest.approx(27.0)
    assert row["halves"] == pytest.approx([27.0 - 1 / 25, 27.0 + 1 / 25])
    assert row["window"] == [100.0, 590.0]
    assert row["ppo_time"] == 110.0  # The first 28, at evaluation 11.
    assert row["es_time"] == 300.0
    assert row["speedup"] == pytest.approx(110.0 / 300.0)
    assert "1/1 seeds" in speedup.table([row])


def test_es_short_of_the_reward_is_a_failure_and_short_ppo_is_refused():
    ppo = log("ppo", [27.0] * 50, 10.0)
    row = speedup.compare(ppo, log("es", [20.0, 26.0], 100.0))
    assert row["es_time"] is None and row["speedup"] is None
    assert "not in 100 s" in speedup.table([row]) and "0/1 seeds" in speedup.table([row])
    with pytest.raises(SystemExit, match="49 evaluations; the converged reward needs 50"):
        speedup.compare(log("ppo", [27.0] * 49, 10.0), None)
