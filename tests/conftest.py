"""Fixtures shared across the tests."""

import atexit
import os
import shutil
import tempfile

import psutil
import pytest
import tensorflow as tf

# The XLA compilation cache of the runs the tests train (train.xla_cache) goes to a folder
# of this session, not to ~/.cache; subprocesses inherit it.
_XLA_CACHE = tempfile.mkdtemp(prefix="batchrl-test-xla-")
atexit.register(shutil.rmtree, _XLA_CACHE, ignore_errors=True)
os.environ["TF_XLA_FLAGS"] = (
    f"{os.environ.get('TF_XLA_FLAGS', '')} --tf_xla_persistent_cache_directory={_XLA_CACHE}"
).strip()


def pytest_addoption(parser):
    parser.addoption(
        "--slow", action="store_true", help="also run the tests marked slow (long learning runs)"
    )


def pytest_collection_modifyitems(config, items):
    """Tests marked slow run only with --slow (or when -m selects them)."""
    if config.getoption("--slow") or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: a long learning run; python -m pytest --slow runs it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


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
