"""The manual's links: every relative link in ``README.md`` and ``docs/*.md`` reaches a file of
this repository, and a ``#fragment`` a heading of the page it names.

A link is ``[text](target)``, ``![alt](target)`` or a reference definition ``[label]: target``,
outside fenced code blocks and inline code. ``http(s)://`` and ``mailto:`` targets are left to
their sites; any other scheme, an absolute path, or a path that leaves the repository (the old
README's ``../shared/design.md``) fails, as does a missing file or heading. Heading ids are
GitHub's: the heading's text lower-cased, punctuation dropped, spaces as hyphens, ``-1``,
``-2``… on repeats. Every page of ``docs/`` must also be reachable from the README's map.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
EXTERNAL = ("http", "https", "mailto")

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+).*?\1")
# [text](target "title") — text may hold brackets one level deep (a link around `code`).
_INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def links(text: str) -> Iterator[tuple[int, str]]:
    """(line number, target) of every link outside code."""
    for number, line in _prose_lines(text):
        line = _CODE_SPAN.sub("", line)
        reference = _REFERENCE.match(line)
        if reference:
            yield number, reference.group(1)
            continue
        for match in _INLINE.finditer(line):
            yield number, match.group(1)


def slug(heading: str) -> str:
    """GitHub's id for a heading's text (markdown links reduced to their text)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading id of a page, repeats numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in _prose_lines(text):
        match = _HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def problems(page: Path, root: Path = ROOT) -> list[str]:
    """What is wrong with ``page``'s links (a page of the repository at ``root``), one line
    each (empty: nothing)."""
    found = []
    text = page.read_text(encoding="utf-8")
    where = page.relative_to(root)
    for number, target in links(text):
        parts = urlsplit(target)
        if parts.scheme in EXTERNAL:
            continue
        if parts.scheme or parts.netloc:
            found.append(f"{where}:{number}: {target}: only relative links and http(s)")
            continue
        path = unquote(parts.path)
        if path.startswith("/"):
            found.append(f"{where}:{number}: {target}: an absolute path; link relatively")
            continue
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.is_relative_to(root):
            found.append(f"{where}:{number}: {target}: outside the repository")
            continue
        if not resolved.exists():
            found.append(f"{where}:{number}: {target}: no such file")
            continue
        if parts.fragment and resolved.suffix == ".md" and resolved.is_file():
            ids = anchors(resolved.read_text(encoding="utf-8"))
            if parts.fragment.lower() not in ids:
                found.append(f"{where}:{number}: {target}: no heading #{parts.fragment} in "
                             f"{resolved.relative_to(root)}")  # fmt: skip
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_heading_of_the_repository(page: Path) -> None:
    assert problems(page) == []


def test_the_readme_links_every_page_of_the_manual() -> None:
    readme = ROOT / "README.md"
    linked = {
        (readme.parent / urlsplit(target).path).resolve()
        for _, target in links(readme.read_text(encoding="utf-8"))
        if not urlsplit(target).scheme
    }
    missing = [str(p.relative_to(ROOT)) for p in PAGES[1:] if p.resolve() not in linked]
    assert missing == [], f"pages of docs/ the README's map does not link: {missing}"


def test_the_checker_finds_what_it_must(tmp_path: Path) -> None:
    """The checker itself, on a page with one of each mistake and each allowed form."""
    text = (
        "# Title\n\n## A `code` heading, with: punctuation\n\n## Title\n\n"
        "[ok](#title) [ok](#a-code-heading-with-punctuation) [ok](#title-1)\n"
        "[external](https://example.com/x) ![image](../code.py) [ok](../code.py#L3)\n"
        "[missing heading](#nowhere) [outside](../../shared/design.md)\n"
        "`[in code](nowhere.md)`\n```\n[in a fence](nowhere.md)\n```\n"
        "[ref]: no-such-file.md\n[abs](/etc/passwd) [scheme](file:///etc/passwd)\n"
    )
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "code.py").write_text("x = 1\n")
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "design.md").write_text("# Design\n")  # there, but not ours
    page = root / "docs" / "page.md"
    page.write_text(text, encoding="utf-8")
    found = problems(page, root)
    assert [line.split(": ", 2)[1] for line in found] == [
        "#nowhere", "../../shared/design.md", "no-such-file.md", "/etc/passwd",
        "file:///etc/passwd",
    ]  # fmt: skip
