"""One record of where, when and at which code a benchmark ran, and one results layout.

    run = harness.Run("envs")           # the machine, load, commit and dirt, now
    with harness.timer() as clock:
        ...
    run.save({"seconds": clock.seconds, ...})   # bench/results/envs.json

A saved file holds `{"command", "machine": {"cpu", "cores", "versions"}, "load_before",
"load_after", "commit", "dirty", "date", ...payload}`. Rows saved before this module
(bench/results/ of 2026-12-06 and earlier) kept the commit and date inside "machine", the
commit with " (with uncommitted changes)" appended: `provenance` reads both.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from ruamel.yaml import YAML, YAMLError

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
# The code a number depends on; bench/results/ is what the benchmarks write, not code.
# Markdown (the folders' READMEs) is not code either.
CODE = ("batchrl", "setup.cfg", "bench", ":(exclude)bench/results", ":(exclude,glob)**/*.md")
PACKAGES = ("tensorflow", "gymnasium", "numpy", "stable-baselines3", "torch", "jax", "ray")
_SUFFIX = " (with uncommitted changes)"


def cpu(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name with its family and model numbers: one name (AMD EPYC) covers
    CPUs of different speeds."""
    fields = {}
    with contextlib.suppress(OSError):
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name") or platform.processor() or "unknown"
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']}, model {fields['model']})"
    return name


def versions() -> dict[str, str]:
    """Python's version and those of the packages in `PACKAGES` that are installed."""
    found = {"python": platform.python_version()}
    for package in PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[package] = metadata.version(package)
    return found


def machine() -> dict:
    return {"cpu": cpu(), "cores": os.cpu_count(), "versions": versions()}


def load() -> float:
    """The load average over the last minute."""
    return round(os.getloadavg()[0], 2)


def git(*args: str, root: Path = ROOT) -> str:
    result = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    return result.stdout.strip()


def dirty(root: Path = ROOT) -> bool:
    """Whether the code (`CODE`) has changes that are not committed."""
    return bool(git("status", "--porcelain", "--untracked-files=no", "--", *CODE, root=root))


def changed_since(
    commit: str, root: Path = ROOT, presets: Iterable[str] | None = None
) -> list[str] | None:
    """The parts of `CODE` (batchrl/, setup.cfg, bench/) that differ between `commit` and
    HEAD: empty when a row measured at `commit` measured HEAD's code; None when this clone
    does not know `commit`. A YAML file whose values are the same at both (its comments
    changed) does not count. For a row that names the `presets` it trains (none, for a row
    that trains none), the files of other presets (batchrl/configs/*.yaml outside their
    chains of `base:` presets) do not count: retuning one preset leaves the others' rows,
    and the rows that train no preset, at HEAD. `presets` None counts every preset."""
    commit = commit.removesuffix(_SUFFIX)
    command = ["git", "diff", "--name-only", commit, "HEAD", "--", *CODE]
    result = subprocess.run(command, cwd=root, capture_output=True, text=True)
    if result.returncode:
        return None
    paths = [p for p in result.stdout.split() if not _same_values(p, commit, root)]
    if presets is not None:
        chains = {f"{_CONFIGS}/{name}.yaml" for one in presets for name in preset_chain(one, root)}
        paths = [path for path in paths if path in chains or not _is_preset_file(path)]
    return sorted({path.split("/")[0] + ("/" if "/" in path else "") for path in paths})


_CONFIGS = "batchrl/configs"


def _same_values(path: str, commit: str, root: Path) -> bool:
    """Whether a YAML file holds the same values at `commit` and HEAD."""
    if not path.endswith((".yaml", ".yml")):
        return False
    texts = [git("show", f"{rev}:{path}", root=root) for rev in (commit, "HEAD")]
    if not all(texts):  # Added or removed.
        return False
    try:
        return YAML(typ="safe").load(texts[0]) == YAML(typ="safe").load(texts[1])
    except YAMLError:  # A file that does not parse counts as changed.
        return False


def _is_preset_file(path: str) -> bool:
    folder, _, name = path.rpartition("/")
    return folder == _CONFIGS and name.endswith(".yaml")


def preset_chain(preset: str, root: Path = ROOT) -> list[str]:
    """`preset` and the presets it takes its values from (`base:`, then `default`), as
    batchrl/configs/ holds them in `root`; just `preset` and `default` when its chain does
    not load (a preset removed since, or a broken `base:`)."""
    from batchrl.config.loading import ConfigError
    from batchrl.config.loading import preset_chain as chain_of

    try:
        chain = chain_of(preset, root / _CONFIGS)
    except ConfigError:
        return [preset, "default"]
    return [path.stem for path, _ in reversed(chain)] + ["default"]


def provenance(record: dict, root: Path = ROOT) -> str:
    """Where a saved row (of either layout, see the module's docstring) stands to HEAD:
    "at HEAD (<commit>)", or "at <commit>; batchrl/ has changed since"; a + after the
    commit when its code had uncommitted changes. A row that names the presets it trains
    ("preset" for one, "presets_used" for several or none) counts only their files among
    the presets (`changed_since`); a row that names none counts every preset's."""
    commit = record.get("commit") or record["machine"]["commit"]
    dirt = record.get("dirty", commit.endswith(_SUFFIX))
    commit = commit.removesuffix(_SUFFIX)
    mark = "+" if dirt else ""
    presets = record.get("presets_used", [record["preset"]] if "preset" in record else None)
    changed = changed_since(commit, root, presets)
    if changed is None:
        return f"at {commit}{mark}; not in this clone"
    if not changed:
        return f"at HEAD ({commit}{mark})"
    parts = " and ".join([", ".join(changed[:-1]), changed[-1]] if len(changed) > 1 else changed)
    return f"at {commit}{mark}; {parts} {'has' if len(changed) == 1 else 'have'} changed since"


def write_json(path: Path, data: dict) -> None:
    """Writes `data` to `path` atomically: a reader sees the old file or the new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(json.dumps(data, indent=1) + "\n")
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


class Run:
    """One benchmark run: made before it starts, it records the machine, load, commit,
    whether the code was dirty, date and command; `save` adds the load after it."""

    def __init__(self, name: str, argv: list[str] | None = None, root: Path = ROOT):
        self.name, self.root = name, root
        argv = list(sys.argv if argv is None else argv)
        if argv and Path(argv[0]).resolve().is_relative_to(root.resolve()):  # As run from root.
            argv[0] = str(Path(argv[0]).resolve().relative_to(root.resolve()))
        self.header = {
            "command": "python " + shlex.join(argv),
            "machine": machine(),
            "load_before": load(),
            "commit": git("rev-parse", "--short", "HEAD", root=self.root),
            "dirty": dirty(self.root),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        }

    def record(self, payload: dict | None = None) -> dict:
        """The header with the load now, then `payload` (whose keys win)."""
        return {**self.header, "load_after": load(), **(payload or {})}

    def save(self, payload: dict, path: Path | str | None = None) -> Path:
        """Writes the record to `path`, by default bench/results/<name>.json."""
        path = Path(path) if path else self.root / "bench" / "results" / f"{self.name}.json"
        write_json(path, self.record(payload))
        return path


@contextlib.contextmanager
def timer():
    """`with timer() as clock: ...`, then `clock.seconds` is the wall-clock it took."""
    clock = _Clock()
    start = time.perf_counter()
    try:
        yield clock
    finally:
        clock.seconds = time.perf_counter() - start


class _Clock:
    seconds: float = 0.0
