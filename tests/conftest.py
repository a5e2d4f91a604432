"""Fixtures shared across the tests."""

import atexit
import ctypes.util
import os
import shutil
import signal
import tempfile

import psutil
import pytest

from batchrl.quiet import import_tensorflow

# The XLA compilation cache of the runs the tests train (train.xla_cache) goes to a folder
# of this session, not to ~/.cache; subprocesses inherit it. Set before TensorFlow finds
# its devices, when XLA reads its flags.
_XLA_CACHE = tempfile.mkdtemp(prefix="batchrl-test-xla-")
atexit.register(shutil.rmtree, _XLA_CACHE, ignore_errors=True)
os.environ["TF_XLA_FLAGS"] = (
    f"{os.environ.get('TF_XLA_FLAGS', '')} --tf_xla_persistent_cache_directory={_XLA_CACHE}"
).strip()

# Without its C++ start-up lines, as the train script imports it: with pytest-xdist the
# main process's lines would otherwise print after the summary (its output is captured
# while the conftest loads and written out at the end).
tf = import_tensorflow()


# Tiers of the suite outside the default one, each with its option: `slow` (learning runs
# over seeds, Ray runs), which CI's second stage runs, `long` (the preset-scale learning
# runs of several minutes each), which CI leaves out for its time limit, and `fuzz` (the
# property-based tests at a hundred examples), which CI leaves out too.
TIERS = {
    "slow": "python -m pytest -m slow runs it, as .ci/run does",
    "long": "python -m pytest -m long runs it; .ci/run does not",
    "fuzz": "python -m pytest -m fuzz runs it; .ci/run does not",
}


def pytest_addoption(parser):
    parser.addoption(
        "--slow",
        action="store_true",
        help="also run the tests marked slow (learning runs over seeds, Ray runs)",
    )
    parser.addoption(
        "--long",
        action="store_true",
        help="also run the tests marked long (preset-scale learning runs, outside CI)",
    )
    parser.addoption(
        "--fuzz",
        action="store_true",
        help="also run the tests marked fuzz (property-based tests at a hundred examples, "
        "outside CI)",
    )


def pytest_runtest_setup(item):
    """A test whose system libraries are missing skips, naming them; in CI it fails.

    CI (the environment variable CI set, as .ci/run does) installs .ci/system-packages.txt,
    so a missing library there is a broken install, not a reason to skip.
    """
    for marker in item.iter_markers("needs_libraries"):
        names, packages = marker.args
        missing = [name for name in names if ctypes.util.find_library(name) is None]
        if not missing:
            continue
        libraries = ", ".join(f"lib{name}" for name in missing)
        message = f"needs {libraries}: apt-get install {packages}"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI installs .ci/system-packages.txt)", pytrace=False)
        pytest.skip(message)


@pytest.hookimpl(tryfirst=True)  # Before xdist's, which reads the groups.
def pytest_collection_modifyitems(config, items):
    """Tests marked slow run only with --slow (or when -m names slow), those marked long
    only with --long (or when -m names long), and those marked fuzz only with --fuzz (or
    when -m names fuzz). The tests on the session's Ray cluster (the `ray_cluster`
    fixture, directly or through another fixture) are slow: starting the two-node cluster
    and its actors takes seconds a test, and with pytest-xdist (-n N) they all go to one
    worker, which starts the cluster once, so in the default suite they would be its
    longest serial path."""
    for item in items:
        if "ray_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.xdist_group("ray_cluster"))
    selected = config.getoption("-m") or ""
    for tier, how in TIERS.items():
        if config.getoption(f"--{tier}") or tier in selected:
            continue
        skip = pytest.mark.skip(reason=f"{tier}: {how}")
        for item in items:
            if tier in item.keywords:
                item.add_marker(skip)


@pytest.fixture
def default_sigint():
    """SIGINT raises KeyboardInterrupt during the test, here and in the children it starts.

    A shell that starts the tests in the background (`&`, nohup, some CI runners) hands
    them SIGINT ignored, and an ignored signal stays ignored across exec. Python's handler
    here instead resets to the default in a child at exec, where Python installs its own.
    The handler from before the test is restored after it.
    """
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.fixture
def no_new_children():
    """Fails a test that leaves a child process behind, running or zombie."""
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    yield
    children = psutil.Process().children(recursive=True)
    left = [child for child in children if child.pid not in before]
    assert not left, f"Child processes left behind: {left}"


def _event_tags(folder):
    tags = set()
    for path in folder.glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            tags.update(value.tag for value in event.summary.value)
    return tags


@pytest.fixture
def event_tags():
    """A function from a folder of TensorBoard event files to the set of their tags."""
    return _event_tags
