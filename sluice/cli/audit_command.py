"""``sluice audit``: the audit from the command line.

    sluice audit --config conf/audit.properties [--until 2026-11-22T03:00:00Z]
                 [--override key=value ...]
    python -m sluice.cli.audit_command audit --config conf/audit.properties

``add_audit_parser(subparsers)`` adds the subcommand to the ``sluice`` CLI. Progress goes to
stderr as ``[sluice audit <UTC time, ISO 8601>] ...`` lines, the report table to stdout (and to
``<report.dir>/audit.txt`` beside ``audit.json`` and ``audit.png``).

Before Spark starts, the command checks the services it can check in seconds: a
``spark://`` master must accept a connection within ``SPARK_MASTER_TIMEOUT_S``, and a broker of
every cluster the audit reads (the live clusters; the offline one when it is a tier) must
answer a Metadata request within ``BROKER_TIMEOUT_S``; then the run checks the schema registry
(5 s), the warehouse (the Iceberg catalog answers; a Parquet table is a readable directory) and
``report.dir`` before its SparkSession (``sluice.pipeline.audit.preflight``) — so a dead
service is exit 3 within about 10 s per cluster, not after Spark's start-up. Exit status
(``sluice.cli.errors``): 0 when every closed window agrees at every tier, 1 when some closed
window differs or the audit failed (a tier unreadable for a reason other than a silent
service, an unwritable ``report.dir``), 2 for a bad configuration or ``--until``, 3 when a
service did not answer (a cluster's brokers, the schema registry, the Iceberg catalog, the
Spark master). A failure is one line; ``--debug`` adds the traceback.
Functions only; no state beyond the call.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from collections.abc import Sequence
from typing import Any

from sluice.cli.config_arguments import (
    add_config_arguments,
    progress_printer,
    stopping_spark_started_inside,
)
from sluice.cli.errors import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    CommandError,
    ServiceUnreachableError,
    report,
    unreachable_cause,
)
from sluice.common.properties import PropertiesError, load_properties
from sluice.pipeline.audit.config import AuditConfig, AuditConfigError, parse_time

__all__ = [
    "BROKER_TIMEOUT_S",
    "DESCRIPTION",
    "SPARK_MASTER_TIMEOUT_S",
    "add_audit_parser",
    "audit_main",
    "main",
    "run_audit_command",
]

DESCRIPTION = (
    "Compare the producers' per-window counts with every tier (live, offline, warehouse). "
    "Exit status: 0 every closed window agrees, 1 some window differs or the audit failed, "
    "2 bad configuration, 3 a service did not answer (a cluster's brokers within "
    "10 s, the schema registry within 5 s, the Iceberg catalog, the Spark master within 5 s); "
    "each is checked before Spark starts."
)
"""The ``--help`` text: plain words, no reST markup."""

BROKER_TIMEOUT_S = 10.0
"""How long a cluster's brokers may take to answer the first Metadata request."""

SPARK_MASTER_TIMEOUT_S = 5.0
"""How long a ``spark://`` master may take to accept a connection."""

_progress = progress_printer("audit")


def add_audit_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``audit`` to an ``argparse`` subparsers object; returns the new parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "audit",
        help="compare the producers' per-window counts with every tier (live, offline, warehouse)",
        description=DESCRIPTION,
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
    debug = bool(getattr(args, "debug", False))
    try:
        config = AuditConfig.from_properties(load_properties(args.config, args.override))
    except (PropertiesError, AuditConfigError) as exc:
        return report("audit", EXIT_USAGE, f"bad configuration: {exc}", debug)
    try:
        until = parse_time(args.until) if args.until else None
    except ValueError as exc:
        return report("audit", EXIT_USAGE, f"--until: {exc}", debug)
    # Here, not at the top: the run needs pyarrow (the ``spark`` extra), and ``sluice --help``
    # builds this parser in an install without it.
    from sluice.pipeline.audit.run import AuditError, run_audit

    try:
        preflight(config)
    except CommandError as exc:
        return report("audit", exc.exit_code, f"FAILED: {exc}", debug)
    try:
        with stopping_spark_started_inside():
            result = run_audit(config, until_ms=until, progress=_progress)
    except AuditError as exc:
        # The run wraps every failure in AuditError; the chain tells a silent service (3)
        # from a tier that answered but could not be counted (1).
        code = EXIT_FAILURE if unreachable_cause(exc) is None else EXIT_UNREACHABLE
        return report("audit", code, f"FAILED: {exc}", debug)
    return EXIT_FAILURE if result.exit_status else EXIT_OK


def preflight(config: AuditConfig) -> None:
    """Raise ``ServiceUnreachableError`` unless the Spark master and a broker of every
    cluster the audit reads answer within their bounds (the module doc); ``CommandError``
    when a cluster refuses the login."""
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):  # spark-submit's --master wins otherwise
        check_spark_master(config.spark_master)
    clusters = list(config.live)
    if "offline" in config.tiers and config.offline is not None:
        clusters.append(config.offline)
    for cluster in clusters:
        check_brokers(cluster.alias, cluster.bootstrap_servers, config.kafka)


def check_brokers(alias: str, bootstrap_servers: str, kafka: dict[str, str]) -> None:
    """One Metadata request to ``bootstrap_servers`` (with the ``kafka.*`` settings) within
    ``BROKER_TIMEOUT_S``, or ``ServiceUnreachableError`` naming the servers."""
    from sluice.pipeline.source.metadata import KafkaMetadata, MetadataError
    from sluice.pipeline.source.split_reader import consumer_config

    options = {**kafka, "kafka.bootstrap.servers": bootstrap_servers}
    try:
        with KafkaMetadata(consumer_config(options), timeout_s=BROKER_TIMEOUT_S) as metadata:
            metadata.partitions_per_topic()
    except MetadataError as exc:
        if type(exc) is not MetadataError:  # a refused login: the cluster answered
            raise CommandError(f"{alias}.bootstrap.servers: {exc}") from None
        found = str(exc).removeprefix("metadata request: expected an answer, found ")
        raise ServiceUnreachableError(
            f"{alias}.bootstrap.servers: expected a broker of {bootstrap_servers} to answer "
            f"within {BROKER_TIMEOUT_S:g}s, found {found}"
        ) from None


def check_spark_master(master: str) -> None:
    """For a standalone master (``spark://host:port[,host:port...]``), one of its addresses
    must accept a TCP connection within ``SPARK_MASTER_TIMEOUT_S``; other masters (local,
    yarn, k8s) are left to Spark."""
    if not master.startswith("spark://"):
        return
    found = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.strip().rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=SPARK_MASTER_TIMEOUT_S):
                return
        except (OSError, ValueError) as exc:
            found.append(f"{address.strip()}: {getattr(exc, 'strerror', None) or exc}")
    raise ServiceUnreachableError(
        f"spark.master: expected the Spark master at {master} to accept a connection within "
        f"{SPARK_MASTER_TIMEOUT_S:g}s, found {'; '.join(found)}"
    )


def audit_main(argv: Sequence[str] | None = None) -> int:
    """``sluice audit`` as a program of its own (``jobs/audit.py`` calls this)."""
    parser = argparse.ArgumentParser(prog="audit", description=DESCRIPTION)
    _add_arguments(parser)
    parser.add_argument("--debug", action="store_true", help="show the traceback of a failure")
    return run_audit_command(parser.parse_args(argv))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sluice.cli.audit_command")
    parser.add_argument("--debug", action="store_true", help="show the traceback of a failure")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_audit_parser(sub)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
