"""Writes the reference of every config key, docs/config.md, from the components' own
section files: `python -m batchrl.scripts.config_reference [--check]`.

Each section is declared once, beside the code that reads it (`batchrl.config.Section`);
this page is generated from those files, so that it is never written twice. `--check`
exits 1 if the page differs from what the files say (CI runs the same comparison as a
test).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from batchrl.config import default_config_dir
from batchrl.config.section import Section, registered_sections

PAGE = Path(__file__).resolve().parents[2] / "docs" / "config.md"

_INTRO = """\
# Config reference

Every key of a batchrl config, its default and what it does, section by section. A run's
config is `default` with the presets named by `base:`, the preset itself (`--config`), and
`--set dotted.key=value` overrides, in that order; a key's type is its default's. A
config sets only the sections of the algorithm and runner it chooses; `env`, `train`,
`network` and `pbt` every run reads. Each section is declared by the component that reads
it, in the YAML file named under its heading, which also holds the rules no type can say
(ranges, choices) in the module named there. This page is generated from those files by
`python -m batchrl.scripts.config_reference`; edit them, not this page. How presets,
overrides and sweeps use these keys is on the [Configs](configs.md) page.
"""


def render() -> str:
    """The page, from `configs/default.yaml` and every registered section."""
    default = default_config_dir() / "default.yaml"
    chosen = [Section(name, default) for name in ("algorithm", "runner")]
    parts = [_INTRO]
    for section in [*chosen, *registered_sections().values()]:
        parts.append(_section(section))
    return "\n".join(parts)


def _section(section: Section) -> str:
    lines = [f"## `{section.name}`", "", f"Declared in `{_relative(section.path)}`.", ""]
    if section.about():
        lines += [section.about(), ""]
    lines += ["| key | default | what it does |", "|---|---|---|"]
    docs = section.docs()
    for key, default in section.defaults().items():
        lines.append(f"| `{section.name}.{key}` | `{_value(default)}` | {_cell(docs[key])} |")
    return "\n".join(lines) + "\n"


def _relative(path: Path) -> str:
    path = Path(path).resolve()
    package = default_config_dir().resolve().parents[1]
    return str(path.relative_to(package)) if path.is_relative_to(package) else str(path)


def _value(value) -> str:
    if value is None:
        return "~"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return repr(value) if not value else value
    return str(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|") or " "


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    args = parser.parse_args(argv)
    page = render()
    if args.check:
        if not PAGE.is_file() or PAGE.read_text() != page:
            print(f"{PAGE} is stale: python -m batchrl.scripts.config_reference", file=sys.stderr)
            return 1
        return 0
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    temp = PAGE.with_suffix(".md.tmp")
    temp.write_text(page)
    temp.replace(PAGE)
    print(f"Wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
