"""Fixtures shared across the tests."""

import psutil
import pytest
import tensorflow as tf


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
