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


class Item:
    """What the collection hook reads of a test: its keywords, fixtures and markers."""

    def __init__(self, *keywords):
        self.keywords = {name: True for name in keywords}
        self.fixturenames = ()
        self.skip = None

    def add_marker(self, marker):
        if marker.name == "skip":
            self.skip = marker.kwargs["reason"]


class Config:
    def __init__(self, args):
        self.options = {"--slow": "--slow" in args, "--long": "--long" in args, "-m": None}
        if "-m" in args:
            self.options["-m"] = args[args.index("-m") + 1]

    def getoption(self, name):
        return self.options[name]


@pytest.mark.parametrize(
    "args, skipped",
    [
        ([], {"slow", "long"}),
        (["--slow"], {"long"}),
        (["-m", "slow"], {"long"}),  # -m slow deselects the long tests; they never run.
        (["-m", "long"], {"slow"}),
        (["--slow", "--long"], set()),
    ],
)
def test_slow_and_long_tests_run_only_when_asked_for(request, args, skipped):
    """The default suite skips both tiers, each naming how to run it; .ci/run's second
    stage (-m slow) runs the slow tests and not the long ones."""
    path = str(Path(__file__).with_name("conftest.py"))
    plugins = request.config.pluginmanager.get_plugins()
    (conftest,) = [plugin for plugin in plugins if getattr(plugin, "__file__", None) == path]
    items = {tier: Item(tier) for tier in ("default", "slow", "long")}
    conftest.pytest_collection_modifyitems(Config(args), list(items.values()))
    reasons = {
        "slow": "slow: python -m pytest --slow runs it, as .ci/run does",
        "long": "long: python -m pytest -m long runs it; .ci/run does not",
    }
    assert {tier: item.skip for tier, item in items.items()} == {
        tier: reasons.get(tier) if tier in skipped else None for tier in items
    }
