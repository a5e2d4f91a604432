"""bench/harness.py: the machine record, the dirty flag, atomic writes, provenance."""

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[2] / "bench"
_SPEC = importlib.util.spec_from_file_location("harness", BENCH / "harness.py")
harness = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(harness)


def git(root, *args):
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(command, cwd=root, check=True, capture_output=True, text=True).stdout


def commit(root, files: dict[str, str]) -> str:
    """Writes `files` (path -> text) under `root` and commits them; the short hash."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "change")
    return git(root, "rev-parse", "--short", "HEAD").strip()


@pytest.fixture
def repo(tmp_path):
    git(tmp_path, "init", "-q")
    commit(tmp_path, {"batchrl/a.py": "1\n", "bench/results/row.json": "{}\n", "docs/x.md": ""})
    return tmp_path


def test_the_cpu_carries_its_family_and_model_numbers_when_cpuinfo_has_them(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    text = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
    cpuinfo.write_text(text + "model name\t: AMD EPYC\n\nprocessor\t: 1\nmodel\t\t: 99\n")
    assert harness.cpu(cpuinfo) == "AMD EPYC (family 25, model 17)"  # The first CPU's.
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Some ARM core\n")
    assert harness.cpu(cpuinfo) == "Some ARM core"


def test_a_run_records_the_code_as_it_was_before_the_run(repo):
    run = harness.Run("row", [str(repo / "bench" / "x.py"), "--seeds", "0 1"], root=repo)
    (repo / "batchrl" / "a.py").write_text("2\n")  # The run itself dirties the code.
    saved = json.loads(run.save({"rate": 3.0}).read_text())
    assert (saved["dirty"], saved["rate"]) == (False, 3.0)
    assert saved["command"] == "python bench/x.py --seeds '0 1'"
    assert saved["commit"] == git(repo, "rev-parse", "--short", "HEAD").strip()
    assert {"cpu", "cores", "versions"} <= saved["machine"].keys()
    assert {"load_before", "load_after", "date"} <= saved.keys()
    assert harness.Run("row", [], root=repo).record()["dirty"]


def test_results_written_by_a_run_do_not_make_the_code_dirty(repo):
    (repo / "bench" / "results" / "row.json").write_text('{"new": 1}\n')
    (repo / "docs" / "x.md").write_text("not code\n")
    assert not harness.dirty(repo)
    (repo / "bench" / "tool.py").write_text("")  # Untracked: not a change to the code.
    assert not harness.dirty(repo)


def test_a_failed_write_leaves_the_old_file_and_no_partial_one(tmp_path, monkeypatch):
    path = tmp_path / "row.json"
    harness.write_json(path, {"old": 1})
    with pytest.raises(TypeError):
        harness.write_json(path, {"new": object()})  # Not JSON.

    def interrupted(source, target):  # The new file is written, then the rename fails.
        assert json.loads(Path(source).read_text()) == {"new": 2}
        raise OSError("interrupted")

    monkeypatch.setattr(harness.os, "replace", interrupted)
    with pytest.raises(OSError):
        harness.write_json(path, {"new": 2})
    assert json.loads(path.read_text()) == {"old": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["row.json"]


def test_provenance_says_whether_a_rows_code_is_heads(repo):
    measured = git(repo, "rev-parse", "--short", "HEAD").strip()
    row = {"commit": measured, "dirty": False}
    assert harness.provenance(row, repo) == f"at HEAD ({measured})"
    commit(repo, {"docs/x.md": "docs\n", "bench/results/row.json": "[]\n"})  # Not code.
    assert harness.changed_since(measured, repo) == []
    assert harness.provenance({**row, "dirty": True}, repo) == f"at HEAD ({measured}+)"
    commit(repo, {"batchrl/a.py": "2\n"})
    assert harness.provenance(row, repo) == f"at {measured}; batchrl/ has changed since"
    commit(repo, {"bench/tool.py": "", "setup.cfg": ""})
    old = {"machine": {"commit": f"{measured} (with uncommitted changes)"}}  # Old layout.
    said = f"at {measured}+; batchrl/, bench/ and setup.cfg have changed since"
    assert harness.provenance(old, repo) == said
    assert harness.provenance({"commit": "0000000"}, repo) == "at 0000000; not in this clone"


def test_a_presets_row_stays_at_head_when_only_other_presets_change(repo):
    files = {"default": "x: 0\n", "base": "x: 1\n", "p": "base: base\n", "other": "x: 1\n"}
    commit(repo, {f"batchrl/configs/{name}.yaml": text for name, text in files.items()})
    measured = git(repo, "rev-parse", "--short", "HEAD").strip()
    row = {"commit": measured, "dirty": False, "preset": "p"}
    commit(repo, {"batchrl/configs/other.yaml": "x: 2\n"})
    assert harness.provenance(row, repo) == f"at HEAD ({measured})"
    changed = f"at {measured}; batchrl/ has changed since"
    assert harness.provenance({**row, "preset": "other"}, repo) == changed
    commit(repo, {"batchrl/configs/base.yaml": "x: 2\n"})  # The preset's base: its own values.
    assert harness.provenance(row, repo) == changed
    assert harness.preset_chain("p", repo) == ["p", "base", "default"]
    assert harness.preset_chain("gone", repo) == ["gone", "default"]


def test_a_row_counts_the_presets_it_names_and_every_preset_when_it_names_none(repo):
    files = {"default": "x: 0\n", "a": "x: 1\n", "b": "x: 1\n"}
    commit(repo, {f"batchrl/configs/{name}.yaml": text for name, text in files.items()})
    measured = git(repo, "rev-parse", "--short", "HEAD").strip()
    commit(repo, {"batchrl/configs/b.yaml": "x: 2\n"})
    row = {"commit": measured, "dirty": False}
    at_head, changed = f"at HEAD ({measured})", f"at {measured}; batchrl/ has changed since"
    assert harness.provenance({**row, "presets_used": []}, repo) == at_head  # Trains none.
    assert harness.provenance({**row, "presets_used": ["a"]}, repo) == at_head
    assert harness.provenance({**row, "presets_used": ["a", "b"]}, repo) == changed
    assert harness.provenance(row, repo) == changed  # Names none: every preset counts.
    commit(repo, {"batchrl/configs/default.yaml": "x: 1\n"})  # Every preset's base.
    assert harness.provenance({**row, "presets_used": ["a"]}, repo) == changed
    assert harness.provenance({**row, "presets_used": []}, repo) == at_head


def test_comments_and_markdown_are_not_code(repo):
    commit(repo, {"batchrl/configs/p.yaml": "x: 1  # one\n"})
    measured = git(repo, "rev-parse", "--short", "HEAD").strip()
    commit(repo, {"batchrl/configs/p.yaml": "# Judged: 5 of 5.\nx: 1  # one\n",
                  "batchrl/README.md": "results\n"})  # fmt: skip
    assert harness.changed_since(measured, repo) == []
    commit(repo, {"batchrl/configs/p.yaml": "x: 2\n"})
    assert harness.changed_since(measured, repo) == ["batchrl/"]


def test_the_timer_measures_the_block():
    with harness.timer() as clock:
        assert clock.seconds == 0.0
    assert clock.seconds > 0.0
