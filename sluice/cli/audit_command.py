"""``sluice audit``: the audit from the command line.

    sluice audit --config conf/audit.properties [--until 2026-11-22T03:00:00Z]
                 [--override key=value ...]
    python -m sluice.cli.audit_command audit --config conf/audit.properties

``add_audit_parser(subparsers)`` adds the subcommand to the ``sluice`` CLI. Progress goes to
stderr as ``[sluice audit HH:MM:SS] ...`` lines, the report table to stdout (and to
``<report.dir>/audit.txt`` beside ``audit.json`` and ``audit.png``). Exit status: 0 when every
closed window agrees at every tier, 1 when some closed window differs, 2 for a bad
configuration, 3 when the audit could not run (a cluster, the registry or a table unreadable).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from sluice.cli.config_arguments import (
    add_config_arguments,
    progress_printer,
    stopping_spark_started_inside,
)
from sluice.common.properties import PropertiesError, load_properties
from sluice.pipeline.audit.config import AuditConfig, AuditConfigError, parse_time

__all__ = [
    "EXIT_BAD_CONFIG",
    "EXIT_DIFFERS",
    "EXIT_FAILED",
    "EXIT_OK",
    "add_audit_parser",
    "audit_main",
    "main",
    "run_audit_command",
]

EXIT_OK, EXIT_DIFFERS, EXIT_BAD_CONFIG, EXIT_FAILED = 0, 1, 2, 3


_progress = progress_printer("audit")


def add_audit_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``audit`` to an ``argparse`` subparsers object; returns the new parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "audit",
        help="compare the producers' per-window counts with every tier (live, offline, warehouse)",
        description=__doc__.split("\n")[0],
    )
    _add_arguments(parser)
    parser.set_defaults(func=run_audit_command)
    return parser


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, "conf/audit.properties")
    parser.add_argument(
        "--until",
        metavar="TIME",
        help="the cutoff: windows ending (plus the grace) after it are not judged; ISO-8601 "
        "(2026-11-22T03:00:00Z, no zone = UTC) or ms since the epoch (default: now)",
    )


def run_audit_command(args: argparse.Namespace) -> int:
    """Run the audit for parsed ``args``; returns the exit status."""
    try:
        config = AuditConfig.from_properties(load_properties(args.config, args.override))
        until = parse_time(args.until) if args.until else None
    except (PropertiesError, AuditConfigError) as exc:
        print(f"sluice audit: bad configuration: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    except ValueError as exc:
        print(f"sluice audit: --until: {exc}", file=sys.stderr)
        return EXIT_BAD_CONFIG
    # Here, not at the top: the run needs pyarrow (the ``spark`` extra), and ``sluice --help``
    # builds this parser in an install without it.
    from sluice.pipeline.audit.run import AuditError, run_audit

    try:
        with stopping_spark_started_inside():
            result = run_audit(config, until_ms=until, progress=_progress)
    except AuditError as exc:
        print(f"sluice audit: FAILED: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_DIFFERS if result.exit_status else EXIT_OK


def audit_main(argv: Sequence[str] | None = None) -> int:
    """``sluice audit`` as a program of its own (``jobs/audit.py`` calls this)."""
    parser = argparse.ArgumentParser(prog="audit", description=__doc__.split("\n")[0])
    _add_arguments(parser)
    return run_audit_command(parser.parse_args(argv))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sluice.cli.audit_command")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_audit_parser(sub)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
