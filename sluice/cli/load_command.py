"""``sluice load``: the nightly load from the command line.

    sluice load --config conf/nightly_load.properties [--override key=value ...]
    python -m sluice.cli.load_command load --config conf/nightly_load.properties

``add_load_parser(subparsers)`` adds the subcommand to the ``sluice`` CLI. Progress goes to
stderr as ``[sluice load <UTC time, ISO 8601>] ...`` lines (while the data is read and written:
splits done of total, rows/s and an ETA — one line rewritten in place on a terminal, a line
every 10 s otherwise), the summary table to stdout. Exit status (``sluice.cli.errors``): 0 when
the run published or found nothing new, 1 when it failed (nothing published; the message and
the report say why), 2 for a bad configuration or a topic that does not exist, 3 when a
service did not answer (the brokers at the start or for ``stallTimeoutMs`` while the splits
waited, the schema registry). A failure is one line; ``--debug`` adds the traceback. Functions
only; no state beyond the call.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from sluice.cli.config_arguments import add_config_arguments, stopping_spark_started_inside
from sluice.cli.errors import EXIT_FAILURE, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE
from sluice.common.properties import PropertiesError, load_properties

__all__ = ["add_load_parser", "load_main", "main", "run_load_command"]


DESCRIPTION = (
    "Load Kafka topics into a Parquet table together with the offsets they came from, in one "
    "atomic step (the nightly job). Exit status: 0 published or nothing new, 1 failed (nothing "
    "published), 2 bad configuration or a missing topic, 3 a broker or the schema registry "
    "did not answer."
)
"""The ``--help`` text: plain words, no reST markup."""


def _progress(message: str) -> None:
    """One ``[sluice load 2026-11-28T03:21:44Z] message`` line on stderr."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"[sluice load {stamp}] {message}", file=sys.stderr, flush=True)


def add_load_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``load`` to an ``argparse`` subparsers object; returns the new parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "load",
        help="load Kafka topics into a Parquet table with their offsets (the nightly job)",
        description=DESCRIPTION,
    )
    add_config_arguments(parser, "conf/nightly_load.properties")
    parser.set_defaults(func=run_load_command)
    return parser


def run_load_command(args: argparse.Namespace) -> int:
    """Run the load for parsed ``args``; returns the exit status."""
    # Lazy: the load needs pyspark and pyarrow (the optional ``spark`` extra), which the rest
    # of the CLI does without.
    from sluice.pipeline.load.config import LoadConfig, LoadConfigError
    from sluice.pipeline.load.errors import UnreachableError
    from sluice.pipeline.load.run import LoadError, run_load

    debug = bool(getattr(args, "debug", False))
    try:
        config = LoadConfig.from_properties(load_properties(args.config, args.override))
    except (PropertiesError, LoadConfigError) as exc:
        return _fail(EXIT_USAGE, f"bad configuration: {exc}", debug)
    _progress(f"loading {config.described_topics} into {config.described_destination}")
    try:
        with stopping_spark_started_inside():
            run_load(config, progress=_progress, live=sys.stderr.isatty())
    except LoadConfigError as exc:  # MissingTopicsError: found by the preflight
        return _fail(EXIT_USAGE, f"bad configuration: {exc}", debug)
    except UnreachableError as exc:
        return _fail(EXIT_UNREACHABLE, f"FAILED: {exc}", debug)
    except LoadError as exc:
        return _fail(EXIT_FAILURE, f"FAILED: {exc}", debug)
    return EXIT_OK


def _fail(code: int, message: str, debug: bool) -> int:
    """Print the one line of a failure (the traceback first with ``--debug``); return ``code``."""
    if debug:
        traceback.print_exc()
    print(f"sluice load: {message}", file=sys.stderr, flush=True)
    return code


def load_main(argv: Sequence[str] | None = None) -> int:
    """``sluice load`` as a program of its own (``jobs/nightly_load.py`` calls this)."""
    parser = argparse.ArgumentParser(prog="nightly_load", description=DESCRIPTION)
    add_config_arguments(parser, "conf/nightly_load.properties")
    parser.add_argument("--debug", action="store_true", help="show the traceback of a failure")
    return run_load_command(parser.parse_args(argv))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sluice.cli.load_command")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_load_parser(sub)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
