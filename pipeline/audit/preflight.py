"""What the audit checks before Spark starts, so an audit that cannot run fails in seconds.

Spark's start-up takes 10–20 s on a small machine, and the audit reads the schema registry,
the warehouse and ``report.dir`` only after it (the report last of all, after every count).
Each check here needs only the driver's Python and answers within its bound.
``preflight(config)`` runs them in this order and raises the first failure:

1. **the schema registry** (``schema.registry.url``; required, since the producers' reports
   are Avro) — ``GET /subjects`` within ``REGISTRY_TIMEOUT_S``; any HTTP answer counts as
   reachable (the reports' subject itself is looked up when a cluster has reports);
2. **the warehouse** (when ``warehouse`` is a tier) — with ``warehouse.format=iceberg`` the
   catalog must answer (pyiceberg's SQL catalog opens its database, naming
   ``iceberg.catalog.uri`` with its password masked when it does not); with ``parquet`` each
   local ``warehouse.table`` that exists must be a directory the driver can read (a table not
   there yet holds no load, which the audit reports);
3. **the report directory** (a local or ``file://`` ``report.dir``) — created if needed, one
   file written and deleted, else the path and the OS's reason. Other schemes are left to the
   write at the end.

Every failure is one :class:`AuditPreflightError` naming the key, what was expected and what
was found. When a service did not answer, its cause is the registry client's
``RegistryConnectionError`` or the catalog's ``CatalogUnavailableError`` — what the CLI's
``unreachable_cause`` looks for (exit 3); otherwise it is exit 1.

The brokers of every cluster and a ``spark://`` master are checked before this by ``sluice
audit`` itself (``sluice.cli.audit_command.preflight``), and ``run_audit`` calls
:func:`preflight` before it builds its SparkSession.

Functions only; nothing is kept between calls.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
import uuid
from urllib.parse import urlsplit

from sluice.pipeline.audit.config import AuditConfig
from sluice.schemas.errors import RegistryConnectionError

__all__ = ["REGISTRY_TIMEOUT_S", "AuditPreflightError", "preflight"]

REGISTRY_TIMEOUT_S = 5.0
"""How long the registry may take to answer ``GET /subjects``."""


class AuditPreflightError(RuntimeError):
    """A check before Spark failed: a service did not answer (see ``__cause__``) or a
    directory cannot be read or written; the message names the key, what was expected and
    what was found."""


def preflight(config: AuditConfig) -> None:
    """Run the checks of the module doc, in order; raise the first failure."""
    check_registry(config.registry_url)
    if "warehouse" in config.tiers:
        if config.warehouse_path is not None:
            check_catalog(config)
        else:
            for table in config.warehouse_tables:
                check_table_dir(table)
    check_report_dir(config.report_dir)


def check_registry(url: str) -> None:
    """``AuditPreflightError`` (caused by the registry client's ``RegistryConnectionError``)
    unless the registry at ``url`` answers HTTP at all within ``REGISTRY_TIMEOUT_S``."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/subjects", timeout=REGISTRY_TIMEOUT_S):
            pass
    except urllib.error.HTTPError:
        return  # it answered
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        message = (
            f"schema.registry.url: expected the schema registry at {url} to answer within "
            f"{REGISTRY_TIMEOUT_S:g}s, found {reason}"
        )
        raise AuditPreflightError(message) from RegistryConnectionError(message)


def check_catalog(config: AuditConfig) -> None:
    """Open the Iceberg catalog of ``warehouse.format=iceberg`` (pyiceberg connects to its
    database); ``AuditPreflightError`` (caused by ``CatalogUnavailableError``) naming
    ``iceberg.catalog.uri`` when it does not answer."""
    from sluice.pipeline.table.iceberg_catalog import CatalogUnavailableError

    iceberg = config.iceberg_config()
    try:
        iceberg.open_catalog()
    except CatalogUnavailableError as exc:
        raise AuditPreflightError(
            f"iceberg.catalog.uri: expected the Iceberg catalog to answer, found {exc}"
        ) from exc


def _local(uri: str) -> str | None:
    """The local path of a path or ``file://`` URI; ``None`` for other schemes."""
    parts = urlsplit(uri)
    return parts.path if parts.scheme in ("", "file") else None


def check_table_dir(table: str) -> None:
    """A local Parquet table that exists must be a directory the driver can list and read."""
    path = _local(table)
    if path is None or not os.path.exists(path):
        return
    if not os.path.isdir(path) or not os.access(path, os.R_OK | os.X_OK):
        raise AuditPreflightError(
            f"warehouse.table: expected a directory the driver can read, found {path} "
            + ("not a directory" if not os.path.isdir(path) else "refusing it: permission denied")
        )


def check_report_dir(report_dir: str) -> None:
    """On a local ``report.dir``, create it if needed and write and delete one file there."""
    path = _local(report_dir)
    if path is None:
        return
    probe = os.path.join(path, f".sluice-write-check-{uuid.uuid4().hex[:12]}")
    try:
        os.makedirs(path, exist_ok=True)
        with open(probe, "wb") as handle:
            handle.write(b"ok")
        os.remove(probe)
    except OSError as exc:
        raise AuditPreflightError(
            f"report.dir: expected a directory the driver can write, found {path} refusing "
            f"it: {exc.strerror or exc}"
        ) from None
