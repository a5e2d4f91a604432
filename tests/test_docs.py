"""The README: short enough to read in five minutes, and every relative link resolves."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 250
# [text](target) and ![alt](target); the target up to a space (a title) or ")".
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)[^)]*\)")


def relative_links(text: str) -> list[str]:
    """The link targets of `text` that are not URLs or anchors of the page itself."""
    targets = LINK.findall(text)
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:|#", t)]


def test_relative_links_are_found_and_urls_and_anchors_are_not():
    text = '[a](docs/x.md#part) ![b](docs/p.png) [c](https://x.org) [d](#here) [e](f.md "t")'
    assert relative_links(text) == ["docs/x.md#part", "docs/p.png", "f.md"]


def test_readme_is_at_most_250_lines():
    lines = README.read_text().count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines; move sections to docs/"


def test_every_relative_link_of_the_readme_points_at_a_file():
    missing = [
        target
        for target in relative_links(README.read_text())
        if not (ROOT / target.split("#")[0]).exists()
    ]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_the_readme_keeps_the_two_commands():
    text = README.read_text()
    train = "pip install -e . && python -m batchrl.scripts.train --config=pendulum"
    assert train in text
    assert 'pip install -e ".[test]" && python -m pytest -n auto' in text
