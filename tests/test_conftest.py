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


def run(tmp_path, tests=NEEDS, extra=()):
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    # A file name of this test's own: the runs share one process and its imported modules.
    (tmp_path / f"test_{tmp_path.name}.py").write_text(tests)
    outcomes = Outcomes()
    args = [str(tmp_path), "-q", "-p", "no:cacheprovider", "--import-mode=importlib", *extra]
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


TIERS = """
import pytest

def test_default():
    pass

@pytest.mark.slow
def test_slow():
    pass

@pytest.mark.long
def test_long():
    pass
"""


@pytest.mark.parametrize(
    "args, ran, skipped",
    [
        ([], {"test_default"}, {"test_slow", "test_long"}),
        (["--slow"], {"test_default", "test_slow"}, {"test_long"}),
        (["-m", "slow"], {"test_slow"}, set()),
        (["-m", "long"], {"test_long"}, set()),
        (["--slow", "--long"], {"test_default", "test_slow", "test_long"}, set()),
    ],
)
def test_slow_and_long_tests_run_only_when_asked_for(tmp_path, args, ran, skipped):
    """The default suite skips both tiers, naming how to run them; .ci/run's second stage
    (-m slow) runs the slow tests and not the long ones."""
    results = run(tmp_path, TIERS, args)
    outcomes = {name: outcome for name, (outcome, _) in results.items()}
    assert outcomes == {**dict.fromkeys(ran, "passed"), **dict.fromkeys(skipped, "skipped")}
    if "test_long" in skipped:
        assert "long: python -m pytest -m long runs it; .ci/run does not" in results["test_long"][1]
    if "test_slow" in skipped:
        assert "slow: python -m pytest --slow runs it, as .ci/run does" in results["test_slow"][1]
