"""What a load checks before Spark starts, so a run that cannot succeed fails in seconds.

Spark's start-up takes 10–20 s on a small machine; every check here needs only the driver's
Python and answers in a few. ``preflight(config, consumer)`` runs them in this order and raises
the first failure:

0. **the warehouse** — below (4.), first because it needs no service;
1. **the brokers** — one Metadata request to ``kafka.bootstrap.servers`` within
   ``BROKER_TIMEOUT_S``; no answer is ``UnreachableError`` (exit 3) naming the servers and
   librdkafka's connection failures per broker, counted, not streamed
   (``sluice.pipeline.source.broker_failures``);
2. **the topics** — every topic of ``topics`` must exist, unless ``allowMissingTopics=true``:
   ``MissingTopicsError`` (exit 2) names the missing ones and the nearest existing names
   (``difflib``, as the configuration's "did you mean" for keys);
3. **the schema registry** (a typed ``valueFormat``: avro, json-schema, protobuf) —
   ``GET /subjects`` within ``REGISTRY_TIMEOUT_S``; no answer is ``UnreachableError``; any
   HTTP answer counts as reachable (the reader schema itself is resolved in the plan phase);
4. **the warehouse** (a local or ``file://`` path) — the driver creates the warehouse
   directory if needed and writes and deletes one file in it (the table's own directory is
   left to the commit protocol); a failure is ``LoadError`` naming the path
   and the OS's reason. On ``hdfs://`` the driver opens the filesystem with pyarrow
   (``session.check_driver_filesystem``: libhdfs); the executors' probe needs Spark and runs
   after it starts (``session.check_filesystem``);
5. **the Iceberg catalog** (``table.format=iceberg``) — opened once
   (``iceberg_tables.check_catalog``): no answer within its connect timeout (a PostgreSQL
   catalog: libpq's ``connect_timeout``, 10 s unless the URI sets one) is ``UnreachableError``
   naming the catalog and its URI, password hidden.

Functions only; nothing is kept between calls.
"""

from __future__ import annotations

import difflib
import os
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from sluice.pipeline.load.config import LoadConfig
from sluice.pipeline.load.errors import LoadError, MissingTopicsError, UnreachableError
from sluice.pipeline.load.session import check_driver_filesystem
from sluice.pipeline.source.metadata import KafkaMetadata, MetadataError

__all__ = ["BROKER_TIMEOUT_S", "REGISTRY_TIMEOUT_S", "nearest_topics", "preflight"]

BROKER_TIMEOUT_S = 10.0
"""How long the first Metadata request may take before the brokers count as down."""

REGISTRY_TIMEOUT_S = 5.0
"""How long the registry may take to answer ``GET /subjects``."""


def preflight(config: LoadConfig, consumer: Mapping[str, Any]) -> dict[str, int]:
    """Run the checks of the module doc; return ``{topic: partitions}`` of the cluster."""
    check_warehouse(config.table_uri)
    counts = check_brokers(config, consumer)
    check_topics(config, counts)
    if config.typed is not None:
        check_registry(config.typed.registry_url)
    if config.iceberg is not None:
        from sluice.pipeline.load.iceberg_tables import check_catalog

        check_catalog(config.iceberg)
    return counts


def check_brokers(config: LoadConfig, consumer: Mapping[str, Any]) -> dict[str, int]:
    """``{topic: partitions}`` from one Metadata request, or ``UnreachableError``."""
    try:
        with KafkaMetadata(consumer, timeout_s=BROKER_TIMEOUT_S) as metadata:
            return metadata.partitions_per_topic()
    except MetadataError as exc:
        found = str(exc).removeprefix("metadata request: expected an answer, found ")
        raise UnreachableError(
            f"kafka.bootstrap.servers: expected a broker of {config.bootstrap_servers} to "
            f"answer within {BROKER_TIMEOUT_S:g}s, found {found}"
        ) from None


def nearest_topics(missing: str, existing: list[str]) -> list[str]:
    """Up to three existing topic names nearest to ``missing``."""
    return difflib.get_close_matches(missing, existing, n=3, cutoff=0.5)


def check_topics(config: LoadConfig, counts: Mapping[str, int]) -> None:
    """Raise ``MissingTopicsError`` for topics of ``topics`` the cluster does not have."""
    if config.allow_missing_topics:
        return
    if config.subscribe_pattern is not None:
        if not config.subscribe_pattern.assigned(counts):
            raise MissingTopicsError(
                f"subscribePattern: expected a topic on {config.bootstrap_servers} matching "
                f"{config.subscribe_pattern.pattern.pattern!r}, found none; set "
                "allowMissingTopics=true to load topics created later"
            )
        return
    missing = [t for t in config.topics if t not in counts]
    if not missing:
        return
    existing = sorted(counts)
    words = []
    for topic in missing:
        near = nearest_topics(topic, existing)
        words.append(
            f"{topic!r}" + (f" (did you mean {', '.join(map(repr, near))}?)" if near else "")
        )
    raise MissingTopicsError(
        f"topics: expected topics that exist on {config.bootstrap_servers}, found no "
        f"{', '.join(words)}; set allowMissingTopics=true to skip topics created later"
    )


def check_registry(url: str) -> None:
    """Raise ``UnreachableError`` unless the registry at ``url`` answers HTTP at all."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/subjects", timeout=REGISTRY_TIMEOUT_S):
            pass
    except urllib.error.HTTPError:
        return  # it answered
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UnreachableError(
            f"schema.registry.url: expected the schema registry at {url} to answer within "
            f"{REGISTRY_TIMEOUT_S:g}s, found {reason}"
        ) from None


def check_warehouse(table_uri: str) -> None:
    """On a local table, create the warehouse directory and write and delete one file there."""
    parts = urlsplit(table_uri)
    if parts.scheme not in ("", "file"):
        check_driver_filesystem(table_uri)
        return
    path = os.path.dirname(parts.path.rstrip("/"))
    probe = os.path.join(path, f".sluice-write-check-{uuid.uuid4().hex[:12]}")
    try:
        os.makedirs(path, exist_ok=True)
        with open(probe, "wb") as handle:
            handle.write(b"ok")
        os.remove(probe)
    except OSError as exc:
        raise LoadError(
            f"warehouse.path: expected a directory the driver can write, found {path} "
            f"refusing it: {exc.strerror or exc}"
        ) from None
