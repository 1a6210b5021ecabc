"""``sluice registry ...`` subcommands, also runnable as ``python -m sluice registry ...``.

* ``registry start --config conf/registry.properties [--override key=value ...]`` — serve in
  the foreground (see :mod:`sluice.schemas.server` for the keys); SIGINT/SIGTERM stop it cleanly.
* ``registry register --url URL --subject S [--type AVRO|JSON|PROTOBUF]
  [--reference NAME=SUBJECT:VERSION ...] FILE`` — register a schema, print its id.
* ``registry list --url URL [--subject S]`` — subjects, or the versions of one subject.
* ``registry mode --url URL [--subject S] [--set MODE [--force]]`` — print (or set, then print)
  the global mode or a subject's (READWRITE, READONLY, READONLY_OVERRIDE, IMPORT).

The project CLI wires these in with :func:`add_registry_parser`; each leaf parser sets
``func``, a callable taking the parsed namespace and returning the exit status. Failures are
raised and turned into one line and an exit status by ``sluice.cli.errors.classify``: 1 the
registry refused the request (an incompatible or invalid schema, 409/422..., with the
registry's message), 2 bad input (a flag, a schema file that does not exist, a bad config),
3 the registry did not answer (refused, or no answer within the client's
``REQUEST_TIMEOUT_S``), naming its URL. ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sluice.cli.errors import classify, report
from sluice.common.logging_setup import configure
from sluice.common.properties import load_properties
from sluice.schemas.client import RegistryClient
from sluice.schemas.server import DEFAULT_LISTENER, RegistryConfig, serve

REQUEST_TIMEOUT_S = 10.0
"""How long a verb waits for the registry's answer to one request (the client's default)."""

DESCRIPTION = (
    "Run the schema registry (Avro, JSON Schema, Protobuf; the Confluent API), or register, "
    "list and set modes against one. Exit status: 0 done, 1 the registry refused the request "
    "(its message is shown), 2 bad input, 3 the registry did not answer within 10 s."
)
"""The ``--help`` text: plain words, no reST markup."""


def add_registry_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``registry`` with its ``start``, ``register``, ``list`` and ``mode`` subcommands."""
    registry = subparsers.add_parser(
        "registry",
        help="schema registry: Avro, JSON Schema, Protobuf (Confluent API)",
        description=DESCRIPTION,
    )
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

    register = commands.add_parser("register", help="register a schema file, print its id")
    register.add_argument("--url", default=DEFAULT_LISTENER, help="registry URL")
    register.add_argument("--subject", required=True, help="subject, e.g. page_views-value")
    register.add_argument(
        "--type",
        choices=["AVRO", "JSON", "PROTOBUF"],
        default="AVRO",
        help="schema type (default AVRO)",
    )
    register.add_argument(
        "--reference",
        action="append",
        default=[],
        type=_reference,
        metavar="NAME=SUBJECT:VERSION",
        help="a schema reference (repeatable): an Avro type, a JSON $ref, a .proto import",
    )
    register.add_argument("file", type=Path, help="schema file (.avsc, .json, .proto)")
    register.set_defaults(func=_register)

    listing = commands.add_parser("list", help="list subjects, or versions of one subject")
    listing.add_argument("--url", default=DEFAULT_LISTENER, help="registry URL")
    listing.add_argument("--subject", help="list this subject's versions and ids")
    listing.set_defaults(func=_list)

    mode = commands.add_parser("mode", help="print, or set, the global or a subject's mode")
    mode.add_argument("--url", default=DEFAULT_LISTENER, help="registry URL")
    mode.add_argument("--subject", help="this subject's mode (default: the global mode)")
    mode.add_argument(
        "--set",
        choices=["READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT"],
        help="set this mode first",
    )
    mode.add_argument("--force", action="store_true", help="allow IMPORT over existing subjects")
    mode.set_defaults(func=_mode)
    return registry  # type: ignore[no-any-return]


def _start(args: argparse.Namespace) -> int:
    config = RegistryConfig.from_properties(load_properties(args.config, args.override or ()))
    configure(config.log_level)
    serve(config)
    return 0


def _reference(text: str) -> dict[str, Any]:
    """``NAME=SUBJECT:VERSION`` → a reference (the subject may hold colons: a context)."""
    name, eq, rest = text.partition("=")
    subject, colon, version = rest.rpartition(":")
    if not (eq and colon and name and subject and version.lstrip("-").isdigit()):
        raise argparse.ArgumentTypeError(f"expected NAME=SUBJECT:VERSION, found {text!r}")
    return {"name": name, "subject": subject, "version": int(version)}


def _register(args: argparse.Namespace) -> int:
    with RegistryClient(args.url, timeout=REQUEST_TIMEOUT_S) as client:
        schema_id = client.register(
            args.subject,
            args.file.read_text(encoding="utf-8"),
            schema_type=args.type,
            references=args.reference,
        )
        print(schema_id)
    return 0


def _mode(args: argparse.Namespace) -> int:
    with RegistryClient(args.url, timeout=REQUEST_TIMEOUT_S) as client:
        if args.set is not None:
            client.set_mode(args.set, args.subject, force=args.force)
        print(client.get_mode(args.subject))
    return 0


def _list(args: argparse.Namespace) -> int:
    with RegistryClient(args.url, timeout=REQUEST_TIMEOUT_S) as client:
        if args.subject is None:
            for subject in client.subjects():
                print(subject)
        else:
            for version in client.versions(args.subject):
                info = client.get_version(args.subject, version)
                print(json.dumps({"version": info["version"], "id": info["id"]}))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sluice.cli.registry_command")
    parser.add_argument("--debug", action="store_true", help="show the traceback of a failure")
    add_registry_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (Exception, KeyboardInterrupt) as exc:
        code, message = classify(exc)
        return report(f"registry {args.registry_command}", code, f"error: {message}", args.debug)


if __name__ == "__main__":
    sys.exit(main())
