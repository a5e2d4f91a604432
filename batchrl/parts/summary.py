"""Scalar summaries whose tags are exactly the given names, even inside control flow."""

from __future__ import annotations

import tensorflow as tf
from tensorboard.plugins.scalar import metadata as scalar_metadata

# `tf.summary.scalar` prefixes the tag with the graph's name scope, which inside
# `tf.while_loop` and `tf.cond` adds `while/cond/`. This writes the same summary with
# the tag as given.
_METADATA = scalar_metadata.create_summary_metadata(display_name=None, description=None)


def scalar(tag: str, value, step=None) -> tf.Tensor:
    """Writes a scalar summary under `tag` at `step` (default: the default summary step)."""
    return tf.summary.write(tag, tf.cast(value, tf.float32), step=step, metadata=_METADATA)
