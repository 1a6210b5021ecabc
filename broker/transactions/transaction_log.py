"""The records of ``__transaction_state``: one per change of a transactional id's metadata
(Kafka's ``TransactionLog``), and which partition holds an id.

A transactional id lives in partition ``abs(java_hash(id)) % transaction.state.log.
num.partitions`` (Kafka's ``partitionFor``, the same hash as a group's offsets partition), and
the leader of that partition is its coordinator. The topic is compacted: only the latest
record per key matters. Each record, JSON in UTF-8 (the encoding of Sluice's offsets topic)::

    key   = {"version": 1, "transactional_id": "orders-tx"}
    value = {"version": 1, "producer_id": 4000, "producer_epoch": 3, "timeout_ms": 60000,
             "state": "Ongoing", "partitions": [["orders", 0], ...], "groups": ["g1"],
             "txn_start_ms": ..., "last_update_ms": ...,
             "pending_offsets": [["g1", "orders", 0, 42, -1, null], ...]}

``pending_offsets`` (group, topic, partition, offset, leader epoch, metadata) is written with
PrepareCommit only. Pure functions; thread-safe.
"""

from __future__ import annotations

import json
from typing import Any

from sluice.broker.groups.offset_store import partition_for as _partition_for
from sluice.broker.transactions.transaction_metadata import (
    PendingOffsets,
    TransactionMetadata,
    TransactionState,
)

TOPIC = "__transaction_state"
VERSION = 1


class CorruptTransactionLogError(ValueError):
    """A ``__transaction_state`` record is not a version-1 key/value this module writes."""


def partition_for(transactional_id: str, partitions: int) -> int:
    return _partition_for(transactional_id, partitions)


def encode_key(transactional_id: str) -> bytes:
    return json.dumps({"version": VERSION, "transactional_id": transactional_id}).encode()


def encode_value(meta: TransactionMetadata) -> bytes:
    pending = [
        [group, topic, partition, offset, epoch, metadata]
        for group, offsets in sorted(meta.pending_offsets.items())
        for (topic, partition), (offset, epoch, metadata) in sorted(offsets.items())
    ]
    doc = {
        "version": VERSION,
        "producer_id": meta.producer_id,
        "producer_epoch": meta.producer_epoch,
        "timeout_ms": meta.timeout_ms,
        "state": meta.state.value,
        "partitions": sorted([t, p] for t, p in meta.partitions),
        "groups": sorted(meta.groups),
        "txn_start_ms": meta.txn_start_ms,
        "last_update_ms": meta.last_update_ms,
        "pending_offsets": pending,
    }
    return json.dumps(doc).encode()


def decode(key: bytes | None, value: bytes | None) -> tuple[str, TransactionMetadata | None]:
    """(transactional id, metadata); None metadata for a tombstone. Raises
    :class:`CorruptTransactionLogError`."""
    try:
        k: Any = json.loads(key or b"")
        if k.get("version") != VERSION:
            raise CorruptTransactionLogError(f"expected key version 1, found {k.get('version')}")
        txn_id = str(k["transactional_id"])
        if value is None:
            return txn_id, None
        v: Any = json.loads(value)
        if v.get("version") != VERSION:
            raise CorruptTransactionLogError(f"expected value version 1, found {v.get('version')}")
        pending: PendingOffsets = {}
        for group, topic, partition, offset, epoch, metadata in v.get("pending_offsets", []):
            pending.setdefault(group, {})[(topic, int(partition))] = (offset, epoch, metadata)
        return txn_id, TransactionMetadata(
            transactional_id=txn_id,
            producer_id=int(v["producer_id"]),
            producer_epoch=int(v["producer_epoch"]),
            timeout_ms=int(v["timeout_ms"]),
            state=TransactionState(v["state"]),
            partitions=frozenset((str(t), int(p)) for t, p in v["partitions"]),
            groups=frozenset(str(g) for g in v["groups"]),
            txn_start_ms=int(v["txn_start_ms"]),
            last_update_ms=int(v["last_update_ms"]),
            pending_offsets=pending,
        )
    except CorruptTransactionLogError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CorruptTransactionLogError(
            f"expected a version-1 transaction state record, found {key!r}: {exc}"
        ) from None
