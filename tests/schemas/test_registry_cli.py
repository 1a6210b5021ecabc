"""``registry register`` / ``registry list`` and the parser the project CLI wires in."""

from __future__ import annotations

import argparse

import pytest

from sluice.cli.registry_command import add_registry_parser, main
from sluice.schemas import schema_path


def test_register_and_list(registry_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(schema_path("page_view"))
    assert (
        main(["registry", "register", "--url", registry_url, "--subject", "cli-value", path]) == 0
    )
    schema_id = int(capsys.readouterr().out)
    assert main(["registry", "list", "--url", registry_url]) == 0
    assert "cli-value" in capsys.readouterr().out.split()
    assert main(["registry", "list", "--url", registry_url, "--subject", "cli-value"]) == 0
    assert capsys.readouterr().out.strip() == f'{{"version": 1, "id": {schema_id}}}'


def test_errors_exit_1(registry_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["registry", "list", "--url", registry_url, "--subject", "no-such"]) == 1
    assert "not found" in capsys.readouterr().err


def test_parser_shape() -> None:
    parser = argparse.ArgumentParser(prog="sluice")
    add_registry_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["registry", "start", "--config", "c.properties", "--override", "a=b", "--override", "c=d"]
    )
    assert (args.config, args.override) == ("c.properties", ["a=b", "c=d"])
    assert callable(args.func)
