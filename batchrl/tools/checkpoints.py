"""A run's checkpoints: atomic saves, and resumes that fall back past unreadable files."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import tensorflow as tf

_NUMBER = re.compile(r"ckpt-(\d+)\.index$")


class CheckpointError(RuntimeError):
    """Checkpoints exist, but none of them can be restored."""


class Untracked:
    """Holds variables where `tf.Module` and `tf.train.Checkpoint` do not look.

    For state that is rebuilt from the config at construction (a seed) or that only
    reports (the latest summaries): a checkpoint without it still restores exactly.
    """

    def __init__(self, variables: dict[str, tf.Variable]):
        self.variables = variables


class Checkpoints:
    """`tf.train.CheckpointManager` for `<logdir>/checkpoints`, with a careful resume.

    `restore` takes the newest checkpoint that reads. It finds checkpoints by their files
    as well as through the manager's `checkpoint` state file, so a missing or garbled
    state file never makes a run start over on top of its own checkpoints; a truncated or
    partial newest checkpoint is skipped, with a message, for the previous one. Folders
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
          CheckpointError: checkpoints exist, but none can be read.
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
                first = str(error).strip().splitlines()[0] if str(error).strip() else ""
                errors.append(f"{prefix}: {type(error).__name__}: {first}")
                report(f"Cannot read checkpoint {prefix} ({type(error).__name__}: {first}).")
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

    def _files(self):
        if not self.folder.is_dir():
            return []
        return [m for m in (_NUMBER.search(p.name) for p in self.folder.iterdir()) if m]

    def _remove_temporary(self) -> None:
        if self.folder.is_dir():
            for path in self.folder.glob("ckpt-*_temp*"):
                shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink()
