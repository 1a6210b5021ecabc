"""The ``sluice`` command line: every subcommand the README names is there, with its help."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sluice.cli import build_parser, main

COMMANDS = [
    "broker", "topics", "produce", "consume", "groups", "zookeeper", "registry", "load",
    "mirror", "audit",
]  # fmt: skip


def test_every_documented_subcommand_is_registered() -> None:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert set(COMMANDS) <= set(sub.choices)  # type: ignore[arg-type]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_of_each_subcommand(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    assert "usage: sluice " + command in capsys.readouterr().out


@pytest.mark.parametrize("command", ["load", "mirror", "audit"])
def test_a_missing_config_file_is_a_clear_configuration_error(command: str) -> None:
    """Through the installed entry point, as a user runs it: exit 2, the path named."""
    proc = subprocess.run(
        [sys.executable, "-m", "sluice", command, "--config", "/nonexistent/x.properties"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "/nonexistent/x.properties" in proc.stderr
