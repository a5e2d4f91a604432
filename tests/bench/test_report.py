"""bench/report.py: the twin's row from hand-made results."""

import ast
import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[2] / "bench"


def load_report(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))  # report.py imports bench/medians.py.
    spec = importlib.util.spec_from_file_location("report", BENCH / "report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_twin_row_divides_the_best_random_rate_by_the_references_step(monkeypatch):
    report = load_report(monkeypatch)
    random = {"1": {"steps_per_s": 250_000.0}, "4096": {"steps_per_s": 11_000_000.0}}
    sap = {"4096": {"steps_per_s": 20_000_000.0}}  # Not the row's policy: ignored.
    reference = {"links": 42, "env": {"steps_per_s": 100_000.0}}
    reference["observe"] = {"steps_per_s": 25_000.0}
    results = {"batchrl": {"nsfnet": {"random": random, "sap": sap}}}
    results["reference"] = {"nsfnet": reference}
    [row] = report.markdown_twin({"results": results})
    assert "NSFNET (42 links) **110x**: 11,000,000 steps/s (B = 4,096) against 100,000" in row
    assert "(440x its step with its agent's observation, 25,000)" in row
    assert "twin" in report.LONG_ROWS  # Only when named: it needs the reference set up.


def test_preset_rows_of_other_seeds_stay_and_the_same_seeds_are_replaced(monkeypatch, tmp_path):
    report = load_report(monkeypatch)
    monkeypatch.setattr(report, "RESULTS", tmp_path)

    def row(preset, seeds, final):
        return {"preset": preset, "runs": [{"seed": s, "final": final} for s in seeds]}

    report.save_preset(row("cartpole", [5, 6], 1.0))
    report.save_preset(row("cartpole", [0, 1], 2.0))
    report.save_preset(row("pendulum", [0, 1], 3.0))
    report.save_preset(row("cartpole", [5, 6], 4.0))  # Replaces the first.
    saved = report._saved_presets()["presets"]
    got = [(r["preset"], [run["seed"] for run in r["runs"]], r["runs"][0]["final"]) for r in saved]
    assert got == [("pendulum", [0, 1], 3.0), ("cartpole", [0, 1], 2.0), ("cartpole", [5, 6], 4.0)]


def test_write_reads_rows_saved_before_the_harness_and_through_it(monkeypatch, tmp_path):
    report = load_report(monkeypatch)
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    head = report.harness.git("rev-parse", "--short", "HEAD")
    machine = {"cpu": "AMD EPYC", "cores": 2, "versions": {"python": "3.11.7"}}
    row = {"command": "c", "load_before": 1.0, "load_after": 2.0, "episodes": 9}
    row |= {"mean": -1.0, "std": 0.0}
    old = {"commit": f"{head} (with uncommitted changes)", "date": "2026-11-01 10:00 UTC"}
    (tmp_path / "random.json").write_text(json.dumps({**row, "machine": machine | old}))
    text = report.markdown(["random"])
    assert (
        f"- random: 2026-11-01 10:00 UTC, load average 1.0 -> 2.0; `c`; at HEAD ({head}+)" in text
    )
    assert f"AMD EPYC (2 cores), commit {head} (with uncommitted changes), python" in text
    new = {"machine": machine, "commit": head, "dirty": False, "date": "2026-12-06 10:00 UTC"}
    (tmp_path / "random.json").write_text(json.dumps({**row, **new}))
    text = report.markdown(["random"])
    assert f"- random: 2026-12-06 10:00 UTC, load average 1.0 -> 2.0; `c`; at HEAD ({head})" in text
    assert f"AMD EPYC (2 cores), commit {head}, python 3.11.7" in text


def test_headline_runs_every_row_the_readme_table_shows_and_no_other(monkeypatch, tmp_path):
    """--headline runs the README's presets on seeds 0 to 4 and 5 to 9 (the two rows the
    table adds up), then sb3, envs and random, with the same arguments as the table."""
    report = load_report(monkeypatch)
    ran = []
    rows = {name: (lambda args, name=name: ran.append((name, list(args.presets),
                                                       list(args.seeds))) or {}, lambda r: [])
            for name in report.ROWS}  # fmt: skip
    monkeypatch.setattr(report, "ROWS", rows)
    monkeypatch.setattr(report, "save", lambda name, result: None)
    report.main(["--headline"])
    headline = list(report.HEADLINE_PRESETS)
    assert [name for name, _, _ in ran] == ["presets", "presets", "sb3", "envs", "random", "tests"]
    assert ran[0][1:] == (headline, [0, 1, 2, 3, 4])
    assert ran[1][1:] == (headline, [5, 6, 7, 8, 9])
    assert ran[2][2] == [0, 1, 2, 3, 4]  # The races' seeds.


def test_tests_row_reads_pytests_summary_and_refuses_a_failed_suite(monkeypatch):
    report = load_report(monkeypatch)

    class Done:
        def __init__(self, code, tail):
            self.returncode, self.stdout = code, f"....\n{tail}\n"

    ok = "=========== 1220 passed, 173 skipped in 300.12s (0:05:00) ==========="
    monkeypatch.setattr(report.subprocess, "run", lambda *a, **k: Done(0, ok))
    row = report.row_tests(None)
    assert (row["counts"], row["pytest_seconds"]) == ("1220 passed, 173 skipped", 300.12)
    quiet = "1229 passed, 173 skipped, 6 warnings in 297.89s (0:04:57)"  # -q: no borders.
    monkeypatch.setattr(report.subprocess, "run", lambda *a, **k: Done(0, quiet))
    assert report.row_tests(None)["counts"] == "1229 passed, 173 skipped, 6 warnings"
    row.update(seconds=301.0, machine={"cores": 2})
    [line] = report.markdown_tests(row)
    assert "1220 passed, 173 skipped in **5 min 01 s**" in line
    failed = "===== 1 failed, 1219 passed in 290.00s ====="
    monkeypatch.setattr(report.subprocess, "run", lambda *a, **k: Done(1, failed))
    with pytest.raises(RuntimeError, match="1 failed"):
        report.row_tests(None)


def loaded_configs(path: Path) -> set[str]:
    """The preset names a script passes to load_run_config, read from its source (importing
    apex_scaling.py would set PYTHONPATH for Ray's workers)."""
    tree = ast.parse(path.read_text())
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    return {
        call.args[0].value
        for call in calls
        if getattr(call.func, "id", None) == "load_run_config"
        and isinstance(call.args[0], ast.Constant)
    }


def test_rows_name_the_presets_they_train(monkeypatch):
    """A saved row carries the presets it trains, so that retuning another preset leaves it
    at HEAD: the races' presets are sb3_race's, the MinAtar row's minatar_budget's, the
    Ape-X row's the configs apex_scaling.py loads."""
    report = load_report(monkeypatch)
    import minatar_budget
    import sb3_race

    assert set(report.ROW_PRESETS["sb3"]) == {"pendulum", "pendulum_tf", "cartpole", "cartpole_tf"}
    assert set(report.ROW_PRESETS["sb3"]) == {
        name for task in report.SB3_TASKS for name in sb3_race.TASKS[task].configs
    }
    used = {name.partition(":")[0] for name in minatar_budget.PRESETS}
    assert set(report.ROW_PRESETS["minatar"]) == used
    assert set(report.ROW_PRESETS["apex"]) == loaded_configs(BENCH / "apex_scaling.py")
    assert "tests" not in report.ROW_PRESETS  # The suite loads every preset.
    saved = {}
    rows = {name: (lambda args: {}, lambda r: []) for name in report.ROWS}
    monkeypatch.setattr(report, "ROWS", rows)
    monkeypatch.setattr(report, "save", lambda name, result: saved.update({name: result}))
    report.main(["--rows", "envs", "tests"])
    assert saved["envs"]["presets_used"] == []
    assert "presets_used" not in saved["tests"]


def test_minatar_budget_saves_every_run_with_its_header(monkeypatch, tmp_path):
    """The MinAtar row's script, its training runs faked: each preset and seed is run once
    with the budget and its own overrides, and the results file holds them all with the
    machine's header (the script once lost 45 minutes of runs to a name it reused)."""
    load_report(monkeypatch)  # Puts bench/ on the path.
    import minatar_budget

    calls = []

    def train_preset(name, seed, overrides):
        calls.append((name, seed, overrides))
        return {"final": float(seed), "steps": 1000 * (seed + 1), "train_seconds": 1.0}

    monkeypatch.setattr(minatar_budget, "train_preset", train_preset)
    path = tmp_path / "minatar.json"
    arguments = ["--seconds", "7", "--seeds", "0", "1", "--presets", "a", "b:x=1,y=2"]
    minatar_budget.main([*arguments, "--output", str(path)])
    budget = ["train.max_seconds=7", "train.eval_every=1000000000"]
    assert calls == [
        ("a", 0, budget), ("b", 0, [*budget, "x=1", "y=2"]),
        ("a", 1, budget), ("b", 1, [*budget, "x=1", "y=2"]),
    ]  # fmt: skip
    result = json.loads(path.read_text())
    assert result["seconds"] == 7 and "machine" in result and "load_after" in result
    assert [run["final"] for run in result["runs"]["b:x=1,y=2"]] == [0.0, 1.0]
