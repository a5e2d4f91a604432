"""bench/slim_es_checkpoint.py: a run resumed from the slimmed copy equals the whole run."""

import importlib.util
import shutil
from pathlib import Path

import numpy as np

from batchrl.runners import train
from tests.algorithms.es.test_es import quiet, whole_and_half_runs
from tests.scripts.test_faults import checkpoint_values, differing_values

PATH = Path(__file__).parents[2] / "bench" / "slim_es_checkpoint.py"
spec = importlib.util.spec_from_file_location("slim_es_checkpoint", PATH)
slim_es_checkpoint = importlib.util.module_from_spec(spec)
spec.loader.exec_module(slim_es_checkpoint)


def test_a_run_resumed_from_the_slimmed_checkpoint_equals_the_whole_run(tmp_path):
    """cartpole_es to 300 steps, its last checkpoint slimmed into a folder of its own and
    resumed to 600: every checkpointed variable equals the uninterrupted run's at 600."""
    whole, half = whole_and_half_runs()
    end = train(whole, tmp_path / "whole", progress=quiet)["step"]
    stop = train(half, tmp_path / "half", progress=quiet)["step"]

    shutil.copytree(tmp_path / "half", tmp_path / "slim")
    kept = tmp_path / "slim" / "checkpoints"
    for path in kept.glob("ckpt-*"):
        path.unlink()
    source, target = tmp_path / "half" / "checkpoints" / f"ckpt-{stop}", kept / f"ckpt-{stop}"
    slim_es_checkpoint.slim(str(source), str(target))
    (kept / "checkpoint").write_text(f'model_checkpoint_path: "ckpt-{stop}"\n')

    noise = slim_es_checkpoint.NOISE + ".ATTRIBUTES/VARIABLE_VALUE"
    generation = slim_es_checkpoint.GENERATION + ".ATTRIBUTES/VARIABLE_VALUE"
    original, slimmed = checkpoint_values(source), checkpoint_values(target)
    assert np.any(original[noise] != 0) and not np.any(slimmed[noise])
    assert int(original[generation]) >= 0 and int(slimmed[generation]) == -1
    differ = differing_values(original, slimmed, skip=(noise, generation))
    assert not differ, differ

    assert train(whole, tmp_path / "slim", progress=quiet)["step"] == end
    expected = checkpoint_values(tmp_path / "whole" / "checkpoints" / f"ckpt-{end}")
    actual = checkpoint_values(kept / f"ckpt-{end}")
    differ = differing_values(expected, actual)
    assert not differ, differ
