"""``sluice load``: the nightly load from the command line.

    sluice load --config conf/nightly_load.properties [--override key=value ...]
    python -m sluice.cli.load_command load --config conf/nightly_load.properties

``add_load_parser(subparsers)`` adds the subcommand to the ``sluice`` CLI. Progress goes to
stderr as ``[sluice load] ...`` lines (while the data is read and written: splits done of
total, rows/s and an ETA — one line rewritten in place on a terminal, a line every 10 s
otherwise), the summary table to stdout. Exit status: 0 when the run
published or found nothing new, 1 when it failed (nothing published; the message and the report
say why), 2 for a bad configuration. Functions only; no state beyond the call.
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

__all__ = ["add_load_parser", "load_main", "main", "run_load_command"]


_progress = progress_printer("load")


def add_load_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``load`` to an ``argparse`` subparsers object; returns the new parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "load",
        help="load Kafka topics into a Parquet table with their offsets (the nightly job)",
        description=__doc__.split("\n")[0],
    )
    add_config_arguments(parser, "conf/nightly_load.properties")
    parser.set_defaults(func=run_load_command)
    return parser


def run_load_command(args: argparse.Namespace) -> int:
    """Run the load for parsed ``args``; returns the exit status."""
    # Lazy: the load needs pyspark and pyarrow (the optional ``spark`` extra), which the rest
    # of the CLI does without.
    from sluice.pipeline.load.config import LoadConfig, LoadConfigError
    from sluice.pipeline.load.run import LoadError, run_load

    try:
        config = LoadConfig.from_properties(load_properties(args.config, args.override))
    except (PropertiesError, LoadConfigError) as exc:
        print(f"sluice load: bad configuration: {exc}", file=sys.stderr)
        return 2
    _progress(f"loading {', '.join(config.topics)} into {config.table_uri}")
    try:
        with stopping_spark_started_inside():
            run_load(config, progress=_progress, live=sys.stderr.isatty())
    except LoadError as exc:
        print(f"sluice load: FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


def load_main(argv: Sequence[str] | None = None) -> int:
    """``sluice load`` as a program of its own (``jobs/nightly_load.py`` calls this)."""
    parser = argparse.ArgumentParser(prog="nightly_load", description=__doc__.split("\n")[0])
    add_config_arguments(parser, "conf/nightly_load.properties")
    return run_load_command(parser.parse_args(argv))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sluice.cli.load_command")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_load_parser(sub)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
