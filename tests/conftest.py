"""Fixtures shared across the tests."""

import psutil
import pytest


@pytest.fixture
def no_new_children():
    """Fails a test that leaves a child process behind, running or zombie."""
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    yield
    children = psutil.Process().children(recursive=True)
    left = [child for child in children if child.pid not in before]
    assert not left, f"Child processes left behind: {left}"
