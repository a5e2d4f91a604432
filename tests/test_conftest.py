"""The suite's own rules: a test whose system library is missing skips, or fails in CI."""

from pathlib import Path

import pytest


def suite_conftest(request):
    """The suite's tests/conftest.py module, as pytest loaded it."""
    path = str(Path(__file__).with_name("conftest.py"))
    plugins = request.config.pluginmanager.get_plugins()
    (conftest,) = [plugin for plugin in plugins if getattr(plugin, "__file__", None) == path]
    return conftest


class Needs:
    """What the setup hook reads of a test: its needs_libraries markers."""

    def __init__(self, names, package):
        self.marks = [pytest.mark.needs_libraries(names, package).mark]

    def iter_markers(self, name):
        return [mark for mark in self.marks if mark.name == name]


def setup_outcome(request, needs: Needs) -> tuple[str, str]:
    """('passed' | 'skipped' | 'failed', message) of the suite's setup hook on `needs`."""
    try:
        suite_conftest(request).pytest_runtest_setup(needs)
    except pytest.skip.Exception as skip:
        return "skipped", str(skip)
    except pytest.fail.Exception as failure:
        return "failed", str(failure)
    return "passed", ""


@pytest.mark.parametrize("ci", [None, "true"])
def test_a_present_library_runs_the_test(request, monkeypatch, ci):
    monkeypatch.delenv("CI", raising=False)
    if ci:
        monkeypatch.setenv("CI", ci)
    assert setup_outcome(request, Needs(["c"], "libc6")) == ("passed", "")


def test_a_missing_library_skips_naming_it_and_its_package(request, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    needs = Needs(["c", "batchrl-no-such-library"], "libno-such-package1")
    assert setup_outcome(request, needs) == (
        "skipped",
        "needs libbatchrl-no-such-library: apt-get install libno-such-package1",
    )


def test_a_missing_library_fails_in_ci(request, monkeypatch):
    monkeypatch.setenv("CI", "true")
    needs = Needs(["batchrl-no-such-library"], "libno-such-package1")
    assert setup_outcome(request, needs) == (
        "failed",
        "needs libbatchrl-no-such-library: apt-get install libno-such-package1 "
        "(CI installs .ci/system-packages.txt)",
    )


class Item:
    """What the collection hook reads of a test: its keywords, fixtures and markers."""

    def __init__(self, *keywords):
        self.keywords = {name: True for name in keywords}
        self.fixturenames = ()
        self.skip = None

    def add_marker(self, marker):
        self.keywords[marker.name] = True  # As pytest's Item.add_marker does.
        if marker.name == "skip":
            self.skip = marker.kwargs["reason"]


class Config:
    def __init__(self, args):
        self.options = {f"--{tier}": f"--{tier}" in args for tier in ("slow", "long", "fuzz")}
        self.options["-m"] = None
        if "-m" in args:
            self.options["-m"] = args[args.index("-m") + 1]

    def getoption(self, name):
        return self.options[name]


@pytest.mark.parametrize(
    "args, skipped",
    [
        ([], {"slow", "long", "fuzz"}),
        (["--slow"], {"long", "fuzz"}),
        (["-m", "slow"], {"long", "fuzz"}),  # -m slow deselects the others; they never run.
        (["-m", "long"], {"slow", "fuzz"}),
        (["-m", "fuzz"], {"slow", "long"}),
        (["--slow", "--long"], {"fuzz"}),
        (["--slow", "--long", "--fuzz"], set()),
    ],
)
def test_slow_long_and_fuzz_tests_run_only_when_asked_for(request, args, skipped):
    """The default suite skips the three tiers, each naming how to run it; .ci/run's
    second stage (-m slow) runs the slow tests and not the long or fuzz ones."""
    conftest = suite_conftest(request)
    items = {tier: Item(tier) for tier in ("default", "slow", "long", "fuzz")}
    conftest.pytest_collection_modifyitems(Config(args), list(items.values()))
    reasons = {
        "slow": "slow: python -m pytest -m slow runs it, as .ci/run does",
        "long": "long: python -m pytest -m long runs it; .ci/run does not",
        "fuzz": "fuzz: python -m pytest -m fuzz runs it; .ci/run does not",
    }
    assert {tier: item.skip for tier, item in items.items()} == {
        tier: reasons.get(tier) if tier in skipped else None for tier in items
    }


@pytest.mark.parametrize(
    "args, skipped", [([], True), (["--slow"], False), (["-m", "slow"], False)]
)
def test_tests_on_the_ray_cluster_are_slow(request, args, skipped):
    """A test on the session's Ray cluster, also through another fixture, is in the slow
    tier, and goes to the one xdist worker that runs the cluster."""
    conftest = suite_conftest(request)
    item = Item()
    item.fixturenames = ("apex", "ray_cluster", "tmp_path")
    conftest.pytest_collection_modifyitems(Config(args), [item])
    assert "slow" in item.keywords and "xdist_group" in item.keywords
    assert (item.skip is not None) == skipped
