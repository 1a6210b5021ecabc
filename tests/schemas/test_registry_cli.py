"""``registry register`` / ``list`` / ``mode`` and the parser the project CLI wires in."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from sluice.cli.registry_command import add_registry_parser, main
from sluice.schemas import schema_path
from sluice.schemas.client import RegistryClient


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


def test_register_with_type_and_reference(
    registry_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    money = tmp_path / "money.proto"
    money.write_text('syntax = "proto3";\npackage cli;\nmessage Money { int64 cents = 1; }\n')
    order = tmp_path / "order.proto"
    order.write_text(
        'syntax = "proto3";\npackage cli;\nimport "cli/money.proto";\n'
        "message Order { cli.Money total = 1; }\n"
    )
    base = ["registry", "register", "--url", registry_url, "--type", "PROTOBUF"]
    assert main([*base, "--subject", "cli-money-value", str(money)]) == 0
    capsys.readouterr()
    reference = "cli/money.proto=cli-money-value:1"
    assert main([*base, "--subject", "cli-order-value", "--reference", reference, str(order)]) == 0
    order_id = int(capsys.readouterr().out)
    with RegistryClient(registry_url) as client:
        version = client.get_version("cli-order-value")
    assert (version["id"], version["schemaType"]) == (order_id, "PROTOBUF")
    assert version["references"] == [
        {"name": "cli/money.proto", "subject": "cli-money-value", "version": 1}
    ]
    with pytest.raises(SystemExit):
        main([*base, "--subject", "s", "--reference", "no-version", str(order)])


def test_mode(registry_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["registry", "mode", "--url", registry_url, "--subject", "cli-mode-value"]
    assert main(base) == 0
    assert capsys.readouterr().out.strip() == "READWRITE"
    assert main([*base, "--set", "READONLY"]) == 0
    assert capsys.readouterr().out.strip() == "READONLY"
    assert main([*base, "--set", "READWRITE"]) == 0
    assert capsys.readouterr().out.strip() == "READWRITE"
