"""The suite's own rules: a test whose system library is missing skips, or fails in CI."""

import shutil
from pathlib import Path

import pytest

NEEDS = """
import pytest

@pytest.mark.needs_libraries(["batchrl-no-such-library"], "libno-such-package1")
def test_missing():
    pass

@pytest.mark.needs_libraries(["c"], "libc6")
def test_present():
    pass
"""


class Outcomes:
    """Records each test's outcome and, for a skip or failure, its message."""

    def __init__(self):
        self.results = {}

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            name = report.nodeid.split("::")[-1]
            self.results[name] = (report.outcome, str(report.longrepr))


def run(tmp_path):
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_needs.py").write_text(NEEDS)
    outcomes = Outcomes()
    args = [str(tmp_path), "-q", "-p", "no:cacheprovider", "--import-mode=importlib"]
    pytest.main(args, plugins=[outcomes])
    return outcomes.results


def test_a_missing_library_skips_naming_it_and_its_package(tmp_path, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    results = run(tmp_path)
    assert results["test_present"][0] == "passed"
    outcome, message = results["test_missing"]
    assert outcome == "skipped"
    assert "libbatchrl-no-such-library: apt-get install libno-such-package1" in message


def test_a_missing_library_fails_in_ci(tmp_path, monkeypatch):
    monkeypatch.setenv("CI", "true")
    results = run(tmp_path)
    assert results["test_present"][0] == "passed"
    outcome, message = results["test_missing"]
    assert outcome == "failed"
    assert "CI installs .ci/system-packages.txt" in message
