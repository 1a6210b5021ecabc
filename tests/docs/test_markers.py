"""docs/development.md's table of pytest markers is the one ``pyproject.toml`` declares: each
marker once, with its declared meaning, and no marker the configuration does not know."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_development_page_lists_every_declared_marker() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    markers = pyproject["tool"]["pytest"]["ini_options"]["markers"]
    meanings = dict(line.split(": ", 1) for line in markers)
    page = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    table = page[page.index("| marker | meaning |") :].split("\n\n", 1)[0]
    rows = dict(re.findall(r"^\| `(\w+)` \| (.+?) \|$", table, flags=re.M))
    assert rows == meanings
