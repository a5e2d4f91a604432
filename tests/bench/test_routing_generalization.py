"""bench/routing_generalization.py scores a checkpoint of a routing_es.py run: the theta
it restores is the one its own training loop reaches, seed for seed."""

import importlib
import json
import sys

import numpy as np
import pytest

from tests.bench.test_report import BENCH

TOPOLOGIES = ["waxman-10-s0", "waxman-12-s1"]
SMALL = [
    f"env.topologies=[{', '.join(TOPOLOGIES)}]",
    "train.jit_compile=false",
    "network.link_state_size=4",
    "network.readout_units=4",
    "network.message_passing_steps=1",
    "es.population=4",
    "es.max_episode_steps=30",
]


def bench_module(monkeypatch, name):
    monkeypatch.syspath_prepend(str(BENCH))  # Both import their neighbours in bench/.
    return importlib.import_module(name)


def best_at_generation(log_class, generation: int):
    """`routing_es.LevelLog` whose evaluation at `generation` reads as the best of all."""

    class Log(log_class):
        def evaluate(self, evaluate, index, *args):
            super().evaluate(evaluate, index, *args)
            if index == generation:
                self.data["evals"][-1][3] = np.inf

    return Log


@pytest.fixture(scope="module")
def es_run(tmp_path_factory):
    """The checkpoint folder of 3 generations of routing_es.py (mixed_es shrunk, seed 3,
    evaluated at 0, 2 and 3), whose evaluation at generation 2 reads as the best, so that
    best/ holds another theta than the folder's last checkpoint."""
    folder = tmp_path_factory.mktemp("es_run")
    checkpoints, log = folder / "checkpoints", folder / "es.json"
    argv = ["routing_es.py", "--config", "mixed_es", "--seed", "3", "--generations", "3"]
    argv += ["--eval-every", "2", "--eval-episodes", "8", "--checkpoints", str(checkpoints)]
    with pytest.MonkeyPatch.context() as monkeypatch:
        routing_es = bench_module(monkeypatch, "routing_es")
        monkeypatch.setattr(routing_es, "LevelLog", best_at_generation(routing_es.LevelLog, 2))
        monkeypatch.setattr(sys, "argv", [*argv, "--out", str(log), *SMALL])
        routing_es.main()
    assert [row[0] for row in json.loads(log.read_text())["evals"]] == [0, 2, 3]
    return checkpoints


def test_the_checkpoint_of_a_routing_es_run_holds_the_theta_of_training_here(monkeypatch, es_run):
    """mixed_es shrunk, on two generated topologies: 3 generations of routing_es.py with
    --checkpoints, restored by `restore`, against 3 generations of
    routing_generalization.py's own loop from a fresh build."""
    generalization = bench_module(monkeypatch, "routing_generalization")
    overrides = [*SMALL, "train.seed=3"]
    _, trained, trainer = generalization.build_es("mixed_es", overrides, 3)
    assert generalization.train(trainer, generations=3, minutes=60)[0] == 3
    _, restored, _ = generalization.build_es("mixed_es", overrides, 3)
    before = restored.strategy.theta.numpy()
    assert generalization.restore(restored, str(es_run)) == 3
    theta = restored.strategy.theta.numpy()
    assert not np.array_equal(theta, before)
    np.testing.assert_array_equal(theta, trained.strategy.theta.numpy())


def test_a_folder_without_checkpoints_is_refused_by_name(monkeypatch, tmp_path):
    generalization = bench_module(monkeypatch, "routing_generalization")
    _, algo, _ = generalization.build_es("mixed_es", SMALL, 0)
    with pytest.raises(SystemExit, match=f"--checkpoint {tmp_path / 'none'}: no checkpoint"):
        generalization.restore(algo, str(tmp_path / "none"))


def test_the_row_of_several_checkpoints_counts_those_above_sap(monkeypatch):
    """Golden cells: paired differences from SAP with their standard errors, k/n above."""
    generalization = bench_module(monkeypatch, "routing_generalization")
    sap = np.array([10.0, 12.0, 14.0, 16.0])
    first = np.array([11.0, 13.0, 15.0, 17.0])  # +1 on every episode: error 0.
    second = np.array([9.0, 12.0, 14.0, 13.0])  # -1, 0, 0, -3: mean -1, s.e. 0.71.
    row = generalization.versus_sap([first, second, sap + 0.5], sap)
    assert row == ("13.17 (12.00 to 14.00)", "+1.00 +- 0.00, -1.00 +- 0.71, +0.50 +- 0.00", "2/3")
    assert generalization.versus_sap([sap], sap) == ("13.00 +- 1.29", "+0.00 +- 0.00", "0/1")


def test_several_checkpoints_are_scored_each_on_the_same_episodes(monkeypatch, capsys, es_run):
    """Two checkpoints of a run (generations 3 and 2, its folder and its best/): each row
    holds both routers' differences from SAP, counts those above it, and gives the mean
    of their means, which is SAP's mean plus the mean difference."""
    generalization = bench_module(monkeypatch, "routing_generalization")
    folder = es_run
    argv = ["routing_generalization.py", "--train", *TOPOLOGIES, "--test", "waxman-11-s2"]
    argv += ["--episodes", "6", "--eval-seed", "5", "--seed", "3"]
    argv += [item for setting in SMALL[1:] for item in ("--set", setting)]
    capsys.readouterr()
    monkeypatch.setattr(sys, "argv", [*argv, "--checkpoint", str(folder), str(folder / "best")])
    generalization.main()
    out = capsys.readouterr().out
    assert f"{folder}, generation 3; {folder / 'best'}, generation 2; 6 fixed episodes" in out
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith("| waxman")]
    assert [row[0] for row in rows] == ["| waxman-10-s0", "| waxman-12-s1", "| waxman-11-s2"]
    for row in rows:
        differences = [float(cell.split(" +- ")[0]) for cell in row[5].split(", ")]
        assert len(differences) == 2 and differences[0] != differences[1]
        assert row[6] == f"{sum(d > 0 for d in differences)}/2"
        router, sap = float(row[4].split(" (")[0]), float(row[7].split(" +- ")[0])
        assert abs(router - (sap + np.mean(differences))) <= 0.011
