"""Whether a run's checkpoints hold its replay buffers: the config's choice, or their size."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

# A config's `checkpoint_replay`: null or 'auto' (buffers under `AUTO_LIMIT` bytes), or a
# bool (YAML's true and false; the strings 'true' and 'false' are accepted too).
CHOICES = (None, "auto", True, False, "true", "false")
AUTO_LIMIT = 1 << 30  # 1 GiB.


def buffer_bytes(buffers: list[tf.Module]) -> int:
    """The bytes the variables of `buffers` hold."""
    return sum(v.shape.num_elements() * v.dtype.size for b in buffers for v in b.variables)


def saves_buffers(choice: Any, buffers: list[tf.Module]) -> bool:
    """Whether checkpoints should hold `buffers`, for a `checkpoint_replay` of `CHOICES`."""
    if choice in (True, "true"):
        return True
    if choice in (False, "false"):
        return False
    return buffer_bytes(buffers) < AUTO_LIMIT
