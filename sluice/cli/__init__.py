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

The client-side commands (registry, load, mirror, audit) are imported when the parser is
built, each from its own package.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    from sluice.cli import broker_command, client_commands, groups_command, zookeeper_command

    parser = argparse.ArgumentParser(prog="sluice", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    broker_command.add_parser(sub)
    client_commands.add_parsers(sub)
    groups_command.add_parser(sub)
    zookeeper_command.add_parser(sub)
    from sluice.cli.registry_command import add_registry_parser

    add_registry_parser(sub)
    from sluice.cli.audit_command import add_audit_parser
    from sluice.cli.load_command import add_load_parser
    from sluice.cli.mirror_command import add_mirror_parser

    add_load_parser(sub)
    add_mirror_parser(sub)
    add_audit_parser(sub)
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
