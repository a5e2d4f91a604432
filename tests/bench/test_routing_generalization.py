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


def test_the_checkpoint_of_a_routing_es_run_holds_the_theta_of_training_here(monkeypatch, tmp_path):
    """mixed_es shrunk, on two generated topologies: 3 generations of routing_es.py with
    --checkpoints (evaluated at 2 and 3), restored by `restore`, against 3 generations of
    routing_generalization.py's own loop from a fresh build."""
    routing_es = bench_module(monkeypatch, "routing_es")
    generalization = bench_module(monkeypatch, "routing_generalization")
    folder, log = tmp_path / "checkpoints", tmp_path / "es.json"
    argv = ["routing_es.py", "--config", "mixed_es", "--seed", "3", "--generations", "3"]
    argv += ["--eval-every", "2", "--eval-episodes", "8", "--checkpoints", str(folder)]
    monkeypatch.setattr(sys, "argv", [*argv, "--out", str(log), *SMALL])
    routing_es.main()
    assert [row[0] for row in json.loads(log.read_text())["evals"]] == [0, 2, 3]

    overrides = [*SMALL, "train.seed=3"]
    _, trained, trainer = generalization.build_es("mixed_es", overrides, 3)
    assert generalization.train(trainer, generations=3, minutes=60)[0] == 3
    _, restored, _ = generalization.build_es("mixed_es", overrides, 3)
    before = restored.strategy.theta.numpy()
    assert generalization.restore(restored, str(folder)) == 3
    theta = restored.strategy.theta.numpy()
    assert not np.array_equal(theta, before)
    np.testing.assert_array_equal(theta, trained.strategy.theta.numpy())


def test_a_folder_without_checkpoints_is_refused_by_name(monkeypatch, tmp_path):
    generalization = bench_module(monkeypatch, "routing_generalization")
    _, algo, _ = generalization.build_es("mixed_es", SMALL, 0)
    with pytest.raises(SystemExit, match=f"--checkpoint {tmp_path / 'none'}: no checkpoint"):
        generalization.restore(algo, str(tmp_path / "none"))
