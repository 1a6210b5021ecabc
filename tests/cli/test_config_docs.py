"""Tests for sluice.cli.config_docs: docs/configuration.md is the page the declarations give."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.cli.config_docs import COMMAND, SECTIONS, main, render

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_the_committed_page_is_the_generated_one() -> None:
    # A key declared, removed or reworded without regenerating the page fails here.
    assert PAGE.read_text(encoding="utf-8") == render(), f"stale: run {COMMAND}"


def test_the_page_says_it_is_generated_and_how() -> None:
    top = render().split("## Contents")[0]
    assert "generated" in top and COMMAND in top


def test_every_declared_key_has_a_row_in_its_section() -> None:
    page = render()
    for section in SECTIONS:
        assert f"\n## {section.title}\n" in page
        for _, declarations in section.tables:
            for name in declarations.names():
                assert f"| `{name}` |" in page


def test_check_and_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "configuration.md"
    assert main(["--check", str(page)]) == 1  # missing
    assert main(["--write", str(page)]) == 0
    assert main(["--check", str(page)]) == 0
    page.write_text(page.read_text(encoding="utf-8").replace("| int |", "| long |", 1))
    assert main(["--check", str(page)]) == 1
    assert f"is stale: regenerate it with {COMMAND}" in capsys.readouterr().err
