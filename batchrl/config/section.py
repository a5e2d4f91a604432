"""A config section, declared by the component that reads it, beside its code.

A section's keys, their defaults (whose types are the keys' types) and a comment on each
are one YAML file in the component's folder (`batchrl/algorithms/ppo/ppo.yaml`), written
as presets are; a `Section` names that file and the function that checks what no type
rules out (ranges, choices, what the section needs of others). Components register
their sections in the entry-point group `batchrl.sections` (setup.cfg; a user's package
in its own metadata): the schema of batchrl's presets is `configs/default.yaml` (the keys
that choose components) with every registered section, and the reference of every key,
docs/config.md, is generated from the same files (`batchrl.scripts.config_reference`).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from batchrl.config.config import Config, ConfigError, yaml_parser
from batchrl.config.registry import ALGORITHMS, RUNNERS, SECTIONS

# A key line of a section file: '  key: value   # doc'; and a comment line.
_KEY = re.compile(r"^  (?P<key>[A-Za-z_]\w*):(?P<value>[^#]*)(#\s?(?P<doc>.*))?$")
_COMMENT = re.compile(r"^\s*#\s?(?P<text>.*)$")


@dataclasses.dataclass(frozen=True)
class Section:
    """A config section and its rules.

    Attributes:
      name: the section's key in a config ('ppo').
      path: its YAML file, whose top-level key `name` maps the section's keys to their
        defaults, each with a comment (on its line and the comment lines below it).
      check: called with the whole config of every run, raises ConfigError naming the
        bad key; None if the component checks its section elsewhere (an algorithm's or
        runner's `check_config`, called when the config chooses it).
      read_when: for a section that only some runs read and that no algorithm or
        runner owns by name, whether `config` reads it; a preset or override that sets
        its keys otherwise is refused. None: decided by the registries (an algorithm's
        or runner's own section), or read by every run.
      read_by: what `read_when` asks for, for that message ('algorithm.name=dqn with
        runner.name=ray').
    """

    name: str
    path: Path
    check: Callable[[Config], None] | None = None
    read_when: Callable[[Config], bool] | None = None
    read_by: str = ""

    def defaults(self) -> dict[str, Any]:
        """The section's keys and defaults, in the file's order."""
        return _read(self.path, self.name)[0]

    def about(self) -> str:
        """The comment at the top of the section, before its first key ('' if none)."""
        return _read(self.path, self.name)[1]

    def docs(self) -> dict[str, str]:
        """Each key's comment, its lines joined ('' for a key without one)."""
        return _read(self.path, self.name)[2]


def registered_sections() -> dict[str, Section]:
    """Every section registered in `batchrl.sections`: those every run reads, then the
    algorithms', then the runners', then those a `read_when` decides; by name within each.

    Raises:
      ConfigError: an entry point is not a `Section` of its own name.
    """
    sections = {}
    for name in SECTIONS.entries():
        section = SECTIONS.resolve(name)
        if not isinstance(section, Section) or section.name != name:
            raise ConfigError(
                f"The entry point {name} = {SECTIONS.entry_point(name)} of the group "
                f"{SECTIONS.group!r} must be a batchrl.config.Section named {name!r}; "
                f"got {section!r}."
            )
        sections[name] = section

    def group(name: str) -> int:
        if sections[name].read_when is not None:
            return 3
        return 1 if ALGORITHMS.is_registered(name) else 2 if RUNNERS.is_registered(name) else 0

    return {name: sections[name] for name in sorted(sections, key=lambda n: (group(n), n))}


@functools.cache
def _read(path: Path, name: str) -> tuple[dict[str, Any], str, dict[str, str]]:
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise ConfigError(f"Cannot read the {name!r} section's file {path}: {error}") from None
    tree = yaml_parser().load(text)
    if not isinstance(tree, dict) or name not in tree or not isinstance(tree[name], dict):
        raise ConfigError(
            f"{path}: a section's file holds its name, {name!r}, as a top-level key, a "
            f"mapping of the section's keys to their defaults; found {list(tree or {})}."
        )
    defaults = _plain(tree[name])
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{name}:"))
    end = next(
        (i for i in range(start + 1, len(lines)) if re.match(r"^[A-Za-z_]", lines[i])),
        len(lines),
    )
    about, docs = _comments(lines[start + 1 : end])
    missing = sorted(set(defaults) - set(docs))
    if missing:
        raise ConfigError(f"{path}: cannot find the lines of keys {missing}.")
    return defaults, about, docs


def _comments(lines: list[str]) -> tuple[str, dict[str, str]]:
    """The section's top comment, and each key's comment lines joined, from the lines
    below the section's own."""
    about: list[str] = []
    docs: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        key, comment = _KEY.match(line), _COMMENT.match(line)
        if key:
            current = docs.setdefault(key["key"], [])
            if key["doc"]:
                current.append(key["doc"].strip())
        elif comment and line.startswith("   ") and current is not None:
            current.append(comment["text"].strip())  # Continues the key above.
        elif comment and not docs:
            about.append(comment["text"].strip())
        elif comment:
            current = None  # A comment on the keys below: not one key's.
    return " ".join(about), {key: " ".join(text) for key, text in docs.items()}


def _plain(value: Any) -> Any:
    """ruamel's commented containers as plain dicts and lists."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value
