"""Which records a read sees: ``kafka.isolation.level``, and why Sluice reads committed ones.

A transactional producer (KIP-98) writes its records to the log as it goes and decides their
fate later: a commit or abort *marker* (a control batch) ends the transaction in every
partition it touched. Until then the records are in the log, above the partition's **last
stable offset** (LSO: the first offset of the oldest open transaction, the high watermark when
none is open). Kafka's consumers choose with ``isolation.level``:

* ``read_committed`` — only committed records; aborted ones and markers are skipped (their
  offsets exist, no record is delivered for them), and nothing at or past the LSO is read;
  ListOffsets "latest" answers the LSO;
* ``read_uncommitted`` — every data record as soon as it is written, aborted ones included,
  up to the high watermark (markers are still never delivered).

Spark's Kafka source passes ``kafka.isolation.level`` through to its consumers
(``KafkaSourceProvider.kafkaParamsForDriver`` / ``kafkaParamsForExecutors`` set no default) and
its driver lists offsets with the same level (``KafkaOffsetReaderAdmin.isolationLevel``), so a
Spark read defaults to the Java client's ``read_uncommitted``; Spark's guide then tells users of
transactional producers to set ``read_committed`` themselves. **Sluice defaults to
``read_committed``** (issue 18), for its source, its streaming reads and the nightly load:

* the warehouse is a system of record: a row from an aborted transaction (an exactly-once
  mirror or sink that died mid-transaction, a Kafka Streams task that was fenced) is a row that
  never happened, and once a nightly load has written it no later run takes it back;
* a range that ends at the LSO holds only decided transactions, so what it yields is fixed
  when it is planned: a retried task, a re-run of the load or a replayed micro-batch reads the
  same records. Up to the high watermark, a read takes the records of transactions still open,
  whose fate nobody knows yet;
* without transactions nothing differs (the LSO is the high watermark and no record is
  skipped), and librdkafka's own default is ``read_committed`` too.

Set ``kafka.isolation.level=read_uncommitted`` to read what Spark reads by default. The level
is parsed here once (case-insensitive, as Java's ``IsolationLevel.valueOf`` upper-cases it) and
handed to librdkafka lower-case; anything else is ``InvalidIsolationLevelError``. Pure
functions over constants; thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "DEFAULT_ISOLATION_LEVEL",
    "ISOLATION_LEVEL_KEY",
    "ISOLATION_LEVELS",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "InvalidIsolationLevelError",
    "isolation_level",
    "parse_isolation_level",
]

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"
ISOLATION_LEVELS = (READ_COMMITTED, READ_UNCOMMITTED)
DEFAULT_ISOLATION_LEVEL = READ_COMMITTED
"""Sluice's default; Spark's (the Java client's) is ``read_uncommitted`` — see the module doc."""

ISOLATION_LEVEL_KEY = "isolation.level"
"""The consumer setting (librdkafka's and Java's name); the source option is ``kafka.`` + it."""


class InvalidIsolationLevelError(ValueError):
    """``kafka.isolation.level`` is neither ``read_committed`` nor ``read_uncommitted``."""


def parse_isolation_level(value: object, where: str = "kafka." + ISOLATION_LEVEL_KEY) -> str:
    """``value`` as ``read_committed`` or ``read_uncommitted`` (any case, blanks around)."""
    level = value.strip().lower() if isinstance(value, str) else ""
    if level not in ISOLATION_LEVELS:
        raise InvalidIsolationLevelError(
            f"option {where!r}: expected {' or '.join(ISOLATION_LEVELS)}, found {value!r}"
        )
    return level


def isolation_level(config: Mapping[str, Any]) -> str:
    """The level of a consumer config (``isolation.level``; absent: ``read_committed``)."""
    value = config.get(ISOLATION_LEVEL_KEY)
    if value is None:
        return DEFAULT_ISOLATION_LEVEL
    return parse_isolation_level(value, ISOLATION_LEVEL_KEY)
