"""``sluice table``: look after a load's Iceberg tables.

    sluice table describe --config conf/nightly_load.properties --topic page_views
    sluice table compact --config ... --table sluice.page_views [--target-size-mb 128]
    sluice table expire-snapshots --config ... --topic page_views [--older-than-hours 120]
    sluice table remove-orphans --config ... --topic page_views [--older-than-hours 24]

The catalog comes from the load's own configuration: ``warehouse.path`` and the ``iceberg.*``
keys (``sluice.pipeline.table.iceberg_catalog``), from ``--config`` and ``--override``, or
``--warehouse`` alone for the embedded SQLite catalog; other keys of the file are the load's
and are not read here. The table is ``--table <namespace>.<name>`` or ``--topic <topic>``
(named as the load names it); ``--errors`` picks the topic's error table.

``describe`` prints the schema, the partition spec and the snapshots of the current ancestry
(newest first) with their offsets, rows, files and bytes (``--json`` for the dict).
``compact`` rewrites each partition's small files in one snapshot keeping the offsets; a load
that commits meanwhile wins and the compaction re-plans (``--attempts``), then fails.
``expire-snapshots`` drops snapshots older than the bound but the current one;
``remove-orphans`` deletes files no snapshot references (crashed runs') older than the bound.

Exit status: 0 done, 1 failed (no such table, a commit conflict that outlived the attempts), 2
usage or configuration, 3 the catalog did not answer. Functions only; no state beyond the call.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

from sluice.cli.config_arguments import add_config_arguments
from sluice.cli.errors import EXIT_FAILURE, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE
from sluice.common.paths import to_uri
from sluice.common.properties import PropertiesError, load_properties

__all__ = ["add_table_parser", "main", "run_table_command"]

ACTIONS = ("describe", "compact", "expire-snapshots", "remove-orphans")

DESCRIPTION = (
    "Describe and maintain the load's Iceberg tables: the catalog comes from the load's "
    "config (warehouse.path and the iceberg.* keys) or --warehouse. Exit status: 0 done, "
    "1 failed (no such table, a commit conflict that outlived the attempts), 2 usage or "
    "configuration, 3 the catalog did not answer."
)
"""The ``--help`` text: plain words, no reST markup."""


def add_table_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``table`` and its actions to an ``argparse`` subparsers object."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "table",
        help="describe and maintain the load's Iceberg tables (compact, expire, orphans)",
        description=DESCRIPTION,
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, help_text in (
        ("describe", "schema, partition spec, snapshots with their offsets, rows, files, bytes"),
        ("compact", "rewrite each partition's small files in one snapshot keeping the offsets"),
        ("expire-snapshots", "drop old snapshots (never the current one)"),
        ("remove-orphans", "delete files no snapshot references (crashed runs')"),
    ):
        action = actions.add_parser(name, help=help_text, description=help_text)
        add_config_arguments(action, "conf/nightly_load.properties", default=None)
        action.add_argument("--warehouse", help="the warehouse (instead of warehouse.path)")
        which = action.add_mutually_exclusive_group(required=True)
        which.add_argument("--table", help="the table, <namespace>.<name>")
        which.add_argument("--topic", help="the topic whose table it is")
        action.add_argument("--errors", action="store_true", help="the topic's error table")
        if name == "describe":
            action.add_argument("--json", action="store_true", help="print the JSON document")
        elif name == "compact":
            action.add_argument("--target-size-mb", type=_positive, default=128)
            action.add_argument("--attempts", type=_positive, default=3)
        elif name == "expire-snapshots":
            action.add_argument("--older-than-hours", type=float, default=120.0)
        else:
            action.add_argument("--older-than-hours", type=float, default=24.0)
    parser.set_defaults(func=run_table_command)
    return parser


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, found {text}")
    return value


def run_table_command(args: argparse.Namespace) -> int:
    """Run ``sluice table <action>`` for parsed ``args``; returns the exit status."""
    from pyiceberg.exceptions import NoSuchTableError

    from sluice.pipeline.table.iceberg_catalog import (
        CatalogUnavailableError,
        IcebergConfig,
        IcebergConfigError,
        is_unavailable,
    )
    from sluice.pipeline.table.iceberg_commit import IcebergCommitConflictError

    debug = bool(getattr(args, "debug", False))
    try:
        props = load_properties(args.config, args.override)
        warehouse = args.warehouse or props.get("warehouse.path")
        if not warehouse:
            raise IcebergConfigError(
                "warehouse.path: expected a value (or --warehouse), found none"
            )
        config = IcebergConfig.from_properties(props, to_uri(warehouse.strip()))
    except (PropertiesError, IcebergConfigError, ValueError) as exc:
        return _fail(args, EXIT_USAGE, f"bad configuration: {exc}", debug)
    identifier = args.table or (
        config.errors_identifier(args.topic) if args.errors else config.identifier(args.topic)
    )
    try:
        catalog = config.open_catalog()
        _act(args, catalog, identifier)
    except CatalogUnavailableError as exc:
        return _fail(args, EXIT_UNREACHABLE, str(exc), debug)
    except NoSuchTableError:
        return _fail(args, EXIT_FAILURE, f"no table {identifier} in the catalog", debug)
    except IcebergCommitConflictError as exc:
        return _fail(args, EXIT_FAILURE, f"FAILED: {exc}", debug)
    except Exception as exc:
        if is_unavailable(exc):
            return _fail(args, EXIT_UNREACHABLE, f"the catalog did not answer: {exc}", debug)
        raise
    return EXIT_OK


def _act(args: argparse.Namespace, catalog: Any, identifier: str) -> None:
    from sluice.pipeline.table import iceberg_maintenance as maintenance

    if args.action == "describe":
        document = maintenance.describe(catalog, identifier)
        print(json.dumps(document, indent=2) if args.json else _describe_text(document))
    elif args.action == "compact":
        result = maintenance.compact(
            catalog,
            identifier,
            target_bytes=args.target_size_mb * 1024 * 1024,
            attempts=args.attempts,
        )
        if result.snapshot_id is None:
            print(f"{identifier}: no partition has more than one small file; nothing to do")
        else:
            print(
                f"{identifier}: rewrote {result.files_before} files of {len(result.partitions)} "
                f"partitions into {result.files_after} ({result.rows} rows) as snapshot "
                f"{result.snapshot_id} (attempt {result.attempts})"
            )
    elif args.action == "expire-snapshots":
        bound = dt.datetime.now(dt.UTC) - dt.timedelta(hours=args.older_than_hours)
        expired = maintenance.expire_snapshots(catalog, identifier, bound)
        print(f"{identifier}: expired {len(expired)} snapshots older than {bound:%Y-%m-%d %H:%M}Z")
        for snapshot_id in expired:
            print(f"  {snapshot_id}")
    else:
        removed = maintenance.remove_orphans(
            catalog, identifier, dt.timedelta(hours=args.older_than_hours)
        )
        print(f"{identifier}: removed {len(removed)} orphan files")
        for uri in removed:
            print(f"  {uri}")


def _describe_text(document: Mapping[str, Any]) -> str:
    lines = [
        f"table {document['table']} at {document['location']}",
        document["schema"],
        f"partition spec {document['partition_spec']}",
        "snapshots (newest first):",
        f"  {'snapshot':>20}  {'time':25}  {'operation':9}  {'rows':>9}  {'files':>6}  "
        f"{'bytes':>11}  run id / offsets",
    ]
    for s in document["snapshots"]:
        lines.append(
            f"  {s['snapshot_id']:>20}  {s['timestamp']:25}  {s['operation'] or '':9}  "
            f"{s['rows']:>9}  {s['files']:>6}  {s['bytes']:>11}  {s['run_id'] or '-'} "
            f"{s['offsets'] or ''}"
        )
    if not document["snapshots"]:
        lines.append("  (none: the table is empty)")
    return "\n".join(lines)


def _fail(args: argparse.Namespace, code: int, message: str, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    print(f"sluice table {args.action}: {message}", file=sys.stderr, flush=True)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sluice.cli.table_command table <action> ...``."""
    parser = argparse.ArgumentParser(prog="python -m sluice.cli.table_command")
    parser.add_argument("--debug", action="store_true", help="show the traceback of a failure")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_table_parser(sub)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
