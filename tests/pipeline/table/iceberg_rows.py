"""Rows shaped as a typed load's (Avro value fields plus the Kafka columns), for the Iceberg
tests: ``typed_rows`` is deterministic, so a test can rebuild what it committed."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

BASE = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
DAY_MICROS = 86_400_000_000


def typed_rows(
    topic: str, partitions: int, start: int, count: int, *, days: int = 3, extra: bool = False
) -> pa.Table:
    """``count`` records per partition, offsets ``[start, start + count)``, event times spread
    evenly over ``days`` days from ``BASE``; ``extra`` adds v2's optional ``referrer``."""
    n = partitions * count
    event = [BASE + dt.timedelta(microseconds=(i * days * DAY_MICROS) // n) for i in range(n)]
    columns = {
        "event_time": pa.array(event, pa.timestamp("us", tz="UTC")),
        "user_id": pa.array([i % 1000 for i in range(n)], pa.int32()),
        "page": pa.array([f"/p/{i % 37}" for i in range(n)]),
    }
    if extra:
        columns["referrer"] = pa.array([f"r{i % 5}" for i in range(n)])
    columns |= {
        "key": pa.array([str(i).encode() for i in range(n)], pa.binary()),
        "topic": pa.array([topic] * n),
        "partition": pa.array([i % partitions for i in range(n)], pa.int32()),
        "offset": pa.array([start + i // partitions for i in range(n)], pa.int64()),
        "timestamp": pa.array([BASE + dt.timedelta(days=days)] * n, pa.timestamp("us", tz="UTC")),
        "timestampType": pa.array([0] * n, pa.int32()),
    }
    return pa.table(columns)
