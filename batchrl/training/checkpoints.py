"""A run's checkpoints: atomic saves, and resumes that fall back past unreadable files."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import tensorflow as tf

_NUMBER = re.compile(r"ckpt-(\d+)\.index$")


class CheckpointError(RuntimeError):
    """Checkpoints exist, but none can be read, or one reads but does not fit the model."""


class Checkpoints:
    """`tf.train.CheckpointManager` for `<logdir>/checkpoints`, with a careful resume.

    `restore` takes the newest checkpoint that reads. It finds checkpoints by their files
    as well as through the manager's `checkpoint` state file, so a missing or garbled
    state file never makes a run start over on top of its own checkpoints; a truncated or
    partial newest checkpoint is skipped, with a message, for the previous one. One that
    reads but does not fit the model (the code or config changed) stops the resume: an
    older one would not fit either, and falling back would roll progress back. Folders
    `ckpt-N_temp*` that a kill during a save left behind are removed. Saves are TF's,
    which write to a temporary folder and rename.
    """

    def __init__(self, checkpoint: tf.train.Checkpoint, folder: str | Path, max_to_keep=3):
        self.folder = Path(folder)
        self._checkpoint = checkpoint
        self._manager = tf.train.CheckpointManager(checkpoint, str(self.folder), max_to_keep)

    def candidates(self) -> list[str]:
        """Checkpoint prefixes on disk, newest (largest number) first."""
        found = {str(self.folder / f"ckpt-{m.group(1)}"): int(m.group(1)) for m in self._files()}
        for path in self._manager.checkpoints:
            found.setdefault(path, int(path.rpartition("-")[2]))
        return sorted(found, key=found.get, reverse=True)

    def restore(self, report, allow_partial=None) -> str | None:
        """Restores the newest readable checkpoint; returns its prefix, or None if none exist.

        Args:
          report: called with a message for each checkpoint skipped.
          allow_partial: called with (prefix, error) when a checkpoint reads but lacks
            some of the objects being restored; returns True to accept it (e.g. a
            checkpoint of an older layout). None refuses such checkpoints.

        Raises:
          CheckpointError: checkpoints exist, but none can be read; or the newest that
            reads does not fit the model (the message names the variables that differ).
        """
        self._remove_temporary()
        candidates = self.candidates()
        errors = []
        for prefix in candidates:
            try:
                status = self._checkpoint.restore(prefix)
                try:
                    status.assert_existing_objects_matched()
                except AssertionError as error:
                    if allow_partial is None or not allow_partial(prefix, error):
                        raise
                    status.expect_partial()
            except (tf.errors.OpError, ValueError, IndexError, AssertionError) as error:
                if _reads(prefix):
                    raise CheckpointError(self._mismatch(prefix, error)) from error
                errors.append(f"{prefix}: {_first_line(error)}")
                report(f"Cannot read checkpoint {prefix} ({_first_line(error)}).")
                continue
            if prefix != candidates[0] or prefix != self._manager.latest_checkpoint:
                report(f"Resuming from {prefix}, the newest checkpoint that reads.")
            return prefix
        if candidates:
            raise CheckpointError(
                f"None of the checkpoints in {self.folder} can be read, so the run cannot "
                "resume; it will not start over on top of them. Move them away to start a "
                "new run in this logdir, or use another --logdir. Errors:\n  " + "\n  ".join(errors)
            )
        return None

    def save(self, number: int) -> str:
        """Writes checkpoint `ckpt-<number>` (replacing one of that number)."""
        return self._manager.save(checkpoint_number=number)

    @property
    def latest(self) -> str | None:
        return self._manager.latest_checkpoint

    def _mismatch(self, prefix: str, error: Exception) -> str:
        """Names the variables in which checkpoint `prefix` and the model differ."""
        with tempfile.TemporaryDirectory() as folder:
            model = _variables(self._checkpoint.write(str(Path(folder) / "model")))
        saved = _variables(prefix)
        differences = [
            _listing("in the checkpoint only:", [saved[k] for k in saved if k not in model]),
            _listing("in the model only:", [model[k] for k in model if k not in saved]),
            _listing(
                "other shape or type (checkpoint -> model):",
                [
                    f"{saved[k]} -> {model[k].partition(' ')[2]}"
                    for k in saved.keys() & model.keys()
                    if saved[k] != model[k]
                ],
            ),
        ]
        differences = [d for d in differences if d] or [_first_line(error)]
        return (
            f"{prefix} reads, but does not fit the model that this code and config build: "
            + "; ".join(differences)
            + ". The run stops rather than fall back to an older checkpoint, which would not "
            "fit either and would roll progress back. Resume with the code and config that "
            "wrote it, or use another --logdir for a new run."
        )

    def _files(self):
        if not self.folder.is_dir():
            return []
        return [m for m in (_NUMBER.search(p.name) for p in self.folder.iterdir()) if m]

    def _remove_temporary(self) -> None:
        if self.folder.is_dir():
            for path in self.folder.glob("ckpt-*_temp*"):
                shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink()


_SKIP = ("_CHECKPOINTABLE_OBJECT_GRAPH", "save_counter/.ATTRIBUTES/VARIABLE_VALUE")


def _reads(prefix: str) -> bool:
    """Whether every tensor of checkpoint `prefix` can be read from its files."""
    try:
        reader = tf.train.load_checkpoint(prefix)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    except (tf.errors.OpError, ValueError, IndexError):  # IndexError: a truncated file.
        return False
    return True


def _variables(prefix: str) -> dict[str, str]:
    """The variables of checkpoint `prefix`: key -> 'name shape dtype'."""
    reader = tf.train.load_checkpoint(prefix)
    shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    return {
        key: f"{key.removesuffix('/.ATTRIBUTES/VARIABLE_VALUE')} {shapes[key]} {dtypes[key].name}"
        for key in shapes
        if key not in _SKIP
    }


def _listing(what: str, items: list[str], most: int = 8) -> str:
    """'what a, b and 3 more', or '' for no items."""
    if not items:
        return ""
    shown = ", ".join(sorted(items)[:most])
    return f"{what} {shown}" + (f" and {len(items) - most} more" if len(items) > most else "")


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__
