"""``sluice registry ...`` subcommands, also runnable as ``python -m sluice registry ...``.

* ``registry start --config conf/registry.properties [--override key=value ...]`` — serve in
  the foreground (see :mod:`sluice.schemas.server` for the keys); SIGINT/SIGTERM stop it cleanly.
* ``registry register --url URL --subject S FILE.avsc`` — register a schema, print its id.
* ``registry list --url URL [--subject S]`` — subjects, or the versions of one subject.

The project CLI wires these in with :func:`add_registry_parser`; each leaf parser sets
``func``, a callable taking the parsed namespace and returning the exit status.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sluice.common.logging_setup import configure
from sluice.common.properties import load_properties
from sluice.schemas.client import RegistryClient
from sluice.schemas.errors import SchemasError
from sluice.schemas.server import DEFAULT_LISTENER, RegistryConfig, serve


def add_registry_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``registry`` with its ``start``, ``register`` and ``list`` subcommands."""
    registry = subparsers.add_parser("registry", help="Avro schema registry (Confluent API)")
    commands = registry.add_subparsers(dest="registry_command", metavar="ACTION")
    commands.required = True

    start = commands.add_parser("start", help="run the registry in the foreground")
    start.add_argument("--config", help="registry .properties file (conf/registry.properties)")
    start.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key (repeatable)",
    )
    start.set_defaults(func=_start)

    register = commands.add_parser("register", help="register an .avsc file, print its id")
    register.add_argument("--url", default=DEFAULT_LISTENER, help="registry URL")
    register.add_argument("--subject", required=True, help="subject, e.g. page_views-value")
    register.add_argument("file", type=Path, help="Avro schema file (.avsc)")
    register.set_defaults(func=_register)

    listing = commands.add_parser("list", help="list subjects, or versions of one subject")
    listing.add_argument("--url", default=DEFAULT_LISTENER, help="registry URL")
    listing.add_argument("--subject", help="list this subject's versions and ids")
    listing.set_defaults(func=_list)
    return registry  # type: ignore[no-any-return]


def _start(args: argparse.Namespace) -> int:
    config = RegistryConfig.from_properties(load_properties(args.config, args.override or ()))
    configure(config.log_level)
    serve(config)
    return 0


def _register(args: argparse.Namespace) -> int:
    with RegistryClient(args.url) as client:
        print(client.register(args.subject, args.file.read_text(encoding="utf-8")))
    return 0


def _list(args: argparse.Namespace) -> int:
    with RegistryClient(args.url) as client:
        if args.subject is None:
            for subject in client.subjects():
                print(subject)
        else:
            for version in client.versions(args.subject):
                info = client.get_version(args.subject, version)
                print(json.dumps({"version": info["version"], "id": info["id"]}))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sluice")
    add_registry_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (SchemasError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
