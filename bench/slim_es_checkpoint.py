"""Copies an ES checkpoint without the population noise of its last generation.

An ES checkpoint of a routing preset is mostly `algo/strategy/_drawn/noise`, the noise
[pairs, parameters] of the generation `ask` drew last (6.6 MB for geant2_es), kept so that
`tell` need not draw it again. ES draws it again from the seed and the generation when
`_drawn/generation` does not name the current generation, so a copy with the noise zeroed
and `_drawn/generation` set to -1 resumes bit for bit and compresses to about 140 KB.
bench/results/vb/ keeps such copies of runs that go on across sessions:

    python bench/slim_es_checkpoint.py ck/ckpt-480 kept/ckpt-480

Write the folder's `checkpoint` file (model_checkpoint_path: "ckpt-480") beside the copy.
"""

from __future__ import annotations

import argparse

import numpy as np
import tensorflow as tf

NOISE = "algo/strategy/_drawn/noise/"
GENERATION = "algo/strategy/_drawn/generation/"


def slim(source: str, target: str) -> int:
    """Writes `target`, a copy of checkpoint `source` whose ES noise is zeros and whose
    `_drawn/generation` is -1; returns the number of tensors written."""
    reader = tf.train.load_checkpoint(source)
    dtypes = reader.get_variable_to_dtype_map()
    if not any(name.startswith(NOISE) for name in dtypes):
        raise SystemExit(f"{source} has no {NOISE}: not an ES checkpoint.")
    names = sorted(dtypes)
    tensors = []
    for name in names:
        value = reader.get_tensor(name)
        if name.startswith(NOISE):
            value = np.zeros_like(value)
        elif name.startswith(GENERATION):
            value = np.full_like(value, -1)
        tensors.append(tf.constant(value, dtype=dtypes[name]))
    tf.raw_ops.SaveV2(
        prefix=target, tensor_names=names, shape_and_slices=[""] * len(names), tensors=tensors
    )
    return len(names)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="checkpoint prefix (ckpt-N)")
    parser.add_argument("target", help="prefix of the copy")
    args = parser.parse_args()
    count = slim(args.source, args.target)
    print(f"wrote {args.target}: {count} tensors")


if __name__ == "__main__":
    main()
