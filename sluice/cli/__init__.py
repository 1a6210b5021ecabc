"""``sluice``: one command line, with subcommands after Kafka's scripts.

sluice broker start --config conf/standalone.properties [--override key=value ...]
sluice topics create|list|describe|delete ...       (kafka-topics.sh)
sluice produce / sluice consume ...                 (kafka-console-producer/consumer.sh)
sluice groups list|describe|reset-offsets ...        (kafka-consumer-groups.sh)
sluice zookeeper start --config conf/zookeeper.properties
sluice registry start|register|list ...             (the schema registry)
sluice load --config conf/nightly_load.properties   (the nightly load)
sluice mirror [run|lag] --config conf/mirror.properties
sluice audit --config conf/audit.properties [--until T]

The top layer: one module per group of subcommands, each adding its parser to ``build_parser``
and importing what it runs from the packages below (``sluice.broker``, ``sluice.schemas``,
``sluice.pipeline``); nothing below imports this package.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from sluice.cli import (
    audit_command,
    broker_command,
    client_commands,
    groups_command,
    load_command,
    mirror_command,
    registry_command,
    zookeeper_command,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sluice", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    broker_command.add_parser(sub)
    client_commands.add_parsers(sub)
    groups_command.add_parser(sub)
    zookeeper_command.add_parser(sub)
    registry_command.add_registry_parser(sub)
    load_command.add_load_parser(sub)
    mirror_command.add_mirror_parser(sub)
    audit_command.add_audit_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        build_parser().print_help()
        return 2
    result = func(args)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
