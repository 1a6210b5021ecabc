"""``sluice``: one command line, with subcommands after Kafka's scripts.

The top layer: one module per group of subcommands, each adding its parser to ``build_parser``
and importing what it runs from the packages below (``sluice.broker``, ``sluice.schemas``,
``sluice.pipeline``); nothing below imports this package. How a command fails (one line, exit
1 failure / 2 usage or configuration / 3 unreachable service) is decided in one place,
``sluice.cli.errors``; ``--debug`` shows the traceback as well.

Kafka's tools take the action as a flag anywhere on the line (``kafka-topics.sh
--bootstrap-server H --create --topic t``); ``sluice`` accepts that order too and reads it as
``sluice topics create --bootstrap-server H --topic t``.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence

from sluice import __version__
from sluice.cli import (
    acls_command,
    admin_commands,
    audit_command,
    broker_command,
    client_commands,
    groups_command,
    load_command,
    mirror_command,
    registry_command,
    table_command,
    zookeeper_command,
)
from sluice.cli.errors import EXIT_USAGE, classify
from sluice.cli.kafka_clients import show_client_logs

DESCRIPTION = "Sluice: Kafka-protocol brokers, a schema registry and a Spark ingestion layer."
EPILOG = """\
commands, after Kafka's scripts:
  sluice broker start --config conf/standalone.properties      kafka-server-start.sh
  sluice topics create|list|describe|alter|delete ...          kafka-topics.sh
  sluice configs describe|alter --entity-type topics|brokers|users  kafka-configs.sh
  sluice produce / sluice consume --topic T                     kafka-console-producer/consumer.sh
  sluice groups list|describe|reset-offsets|delete ...          kafka-consumer-groups.sh
  sluice get-offsets --topic T [--time -1|-2|MS]                kafka-get-offsets.sh
  sluice acls list|add|remove --topic T --allow-principal User:U  kafka-acls.sh
  sluice delete-records --offset-json-file F                    kafka-delete-records.sh
  sluice zookeeper start --config conf/zookeeper.properties
  sluice registry start|register|list ...                       the Avro schema registry
  sluice load --config conf/nightly_load.properties             the nightly load
  sluice mirror [run|lag] --config conf/mirror.properties       the mirror
  sluice audit --config conf/audit.properties                   the audit
  sluice table describe|compact|expire-snapshots|remove-orphans --topic T   Iceberg tables

exit status: 0 done, 1 failed, 2 usage or configuration error, 3 a service did not answer.
`sluice COMMAND --help` shows a command's actions and options with their defaults.
"""

# Kafka's action flags, per command, and the subcommand each stands for.
KAFKA_ACTION_FLAGS = {
    "topics": {"--create": "create", "--list": "list", "--describe": "describe",
               "--delete": "delete", "--alter": "alter"},
    "groups": {"--list": "list", "--describe": "describe", "--delete": "delete",
               "--reset-offsets": "reset-offsets"},
    "acls": {"--list": "list", "--add": "add", "--remove": "remove"},
}  # fmt: skip


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions as written, and every option's default shown."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sluice", description=DESCRIPTION, epilog=EPILOG, formatter_class=HelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"sluice {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of an error, not only its line"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    broker_command.add_parser(sub)
    topics_actions = client_commands.add_parsers(sub)
    groups_actions = groups_command.add_parser(sub)
    admin_commands.add_parsers(sub, topics_actions, groups_actions)
    acls_command.add_parser(sub)
    zookeeper_command.add_parser(sub)
    registry_command.add_registry_parser(sub)
    load_command.add_load_parser(sub)
    mirror_command.add_mirror_parser(sub)
    audit_command.add_audit_parser(sub)
    table_command.add_table_parser(sub)
    _describe_defaults(parser)
    return parser


def _describe_defaults(parser: argparse.ArgumentParser) -> None:
    """Every subparser shows defaults, and its actions by name rather than ``ACTION``."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        names = sorted(action.choices)
        if action.metavar in ("ACTION", "COMMAND") and action.dest != "command":
            action.metavar = "{" + ",".join(names) + "}"
        for child in action.choices.values():
            child.formatter_class = HelpFormatter
            _describe_defaults(child)


def kafka_style(argv: Sequence[str]) -> list[str]:
    """``topics --bootstrap-server H --create ...`` → ``topics create --bootstrap-server H ...``.

    Only when exactly one action flag of the command is present (otherwise argparse reports
    the ambiguity); ``--debug`` before the command is kept in place.
    """
    args = list(argv)
    start = 0
    while start < len(args) and args[start].startswith("-"):
        start += 1
    if start >= len(args) or args[start] not in KAFKA_ACTION_FLAGS:
        return args
    flags = KAFKA_ACTION_FLAGS[args[start]]
    present = [i for i, a in enumerate(args[start + 1 :], start + 1) if a in flags]
    if len(present) != 1:
        return args
    (index,) = present
    action = flags[args.pop(index)]
    args.insert(start + 1, action)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = kafka_style(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.debug:
        show_client_logs()
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(func(args) or 0)
    except (Exception, KeyboardInterrupt) as exc:
        code, message = classify(exc)
        if getattr(args, "debug", False):
            traceback.print_exc()
        print(f"sluice {args.command}: error: {message}", file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())
