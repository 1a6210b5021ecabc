"""What the client-side commands (``load``, ``audit``, ``mirror``) share: their config
arguments, their progress lines, and stopping a Spark session they started.

* ``add_config_arguments``: ``--config <file>`` and repeatable ``--override key=value``, as
  every client-side command takes them (the mirror accepts them before and after its action,
  hence ``default``).
* ``progress_printer``: ``[sluice <command> 2026-11-28T06:00:26Z] message`` lines on stderr
  (UTC, ISO 8601 with date and zone, as ``sluice load`` stamps its lines: a log kept by cron
  over several nights stays readable).
* ``stopping_spark_started_inside``: a context manager that stops the active Spark session on
  the way out if the block started it (a session the caller already had is left running).

Functions only; no state beyond the call.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["add_config_arguments", "progress_printer", "stopping_spark_started_inside"]

_REQUIRED = object()


def add_config_arguments(
    parser: argparse.ArgumentParser, example: str, *, default: Any = _REQUIRED
) -> None:
    """``--config <file>`` and repeatable ``--override KEY=VALUE`` on ``parser``; ``example``
    names the shipped file in the help. ``--config`` is required unless ``default`` is given
    (``None``, or ``argparse.SUPPRESS`` on an action's parser so that a value given before
    the action is kept)."""
    if default is _REQUIRED:
        parser.add_argument("--config", required=True, help=f"a .properties file ({example})")
        overrides: Any = []
    else:
        parser.add_argument("--config", default=default, help=f"a .properties file ({example})")
        overrides = [] if default is None else default
    parser.add_argument(
        "--override",
        action="append",
        default=overrides,
        metavar="KEY=VALUE",
        help="set a config key over the file (repeatable)",
    )


def progress_printer(command: str) -> Callable[[str], None]:
    """A progress callback printing ``[sluice <command> <UTC time, ISO 8601>] message`` lines
    to stderr."""

    def progress(message: str) -> None:
        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        print(f"[sluice {command} {stamp}] {message}", file=sys.stderr, flush=True)

    return progress


@contextmanager
def stopping_spark_started_inside() -> Iterator[None]:
    """Stop the Spark session the block started, if it started one; leave the caller's."""
    before = _active_spark()
    try:
        yield
    finally:
        started = _active_spark()
        if started is not None and started is not before:
            started.stop()


def _active_spark() -> Any:
    if "pyspark.sql" not in sys.modules:
        return None  # never imported: no session (the run needed no Spark)
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()
