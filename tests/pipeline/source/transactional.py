"""Transactional data for the source's read_committed tests: one partition, every fate a
record can have, written by real confluent-kafka transactional producers.

``write_mixed_log`` fills partition 0 of a fresh topic, in this order:

1. a committed transaction: ``c0``, ``c1``, ``c2`` (+ its commit marker);
2. an aborted transaction: ``a0``, ``a1`` (flushed first, so they are in the log) + its abort
   marker;
3. a plain (non-transactional) record ``p0``;
4. a committed transaction: ``c3`` (+ marker);
5. with ``leave_open``: a transaction of a second ``transactional.id`` left open: ``o0`` —
   the last stable offset (LSO) stays at ``o0``'s offset while it is open;
6. with ``leave_open``: a committed transaction after it: ``c4`` (+ marker) — committed, but
   above the LSO, so read_committed readers do not see it until ``o0``'s transaction ends.

``MixedLog`` is the model: each data record's offset (from the delivery reports), the LSO and
the high watermark. Markers are never delivered to any reader; aborted records only to
``read_uncommitted`` ones. ``MixedLog.close()`` aborts the open transaction (tests call it in
``finally``). Not thread-safe; one ``MixedLog`` per test.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from sluice.testing.broker import create_topic

_TIMEOUT_S = 30.0


@dataclass
class MixedLog:
    """What ``write_mixed_log`` wrote to ``topic``-0 (see the module doc)."""

    topic: str
    offsets: dict[str, int] = field(default_factory=dict)  # value -> offset
    committed: list[str] = field(default_factory=list)  # in offset order
    aborted: list[str] = field(default_factory=list)
    open_values: list[str] = field(default_factory=list)
    lso: int = 0
    high_watermark: int = 0
    open_producer: Any = None

    def below(self, values: list[str], end: int, start: int = 0) -> list[tuple[int, str]]:
        """``(offset, value)`` of ``values`` in ``[start, end)``, in offset order."""
        return sorted((self.offsets[v], v) for v in values if start <= self.offsets[v] < end)

    def visible_committed(self) -> list[tuple[int, str]]:
        """What a read_committed reader of ``[0, LSO)`` gets."""
        return self.below(self.committed, self.lso)

    def everything(self) -> list[tuple[int, str]]:
        """What a read_uncommitted reader of ``[0, high watermark)`` gets: every data record."""
        return self.below(self.committed + self.aborted + self.open_values, self.high_watermark)

    def commit_open(self) -> None:
        """End the open transaction with a commit (its records become visible)."""
        assert self.open_producer is not None
        self.open_producer.commit_transaction(_TIMEOUT_S)
        self.committed.extend(self.open_values)
        self.open_values = []
        self.open_producer = None

    def close(self) -> None:
        """Abort the open transaction, if any, so it holds back no LSO after the test."""
        if self.open_producer is not None:
            self.open_producer.abort_transaction(_TIMEOUT_S)
            self.aborted.extend(self.open_values)
            self.open_values = []
            self.open_producer = None


def _producer(bootstrap: str, *, transactional: bool) -> Producer:
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "linger.ms": 5}
    if transactional:
        config["transactional.id"] = f"sluice-test-{uuid.uuid4().hex[:12]}"
    producer = Producer(config)
    if transactional:
        producer.init_transactions(_TIMEOUT_S)
    return producer


def _send(producer: Producer, offsets: dict[str, int], topic: str, values: list[str]) -> None:
    errors: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            offsets[msg.value().decode()] = msg.offset()

    for value in values:
        producer.produce(topic, value=value.encode(), partition=0, on_delivery=delivered)
    remaining = producer.flush(_TIMEOUT_S)
    assert remaining == 0 and not errors, f"undelivered: {remaining}, errors: {errors}"


def _transaction(
    producer: Producer, offsets: dict[str, int], topic: str, values: list[str], *, commit: bool
) -> None:
    producer.begin_transaction()
    _send(producer, offsets, topic, values)  # flushed: the records are in the log
    if commit:
        producer.commit_transaction(_TIMEOUT_S)
    else:
        producer.abort_transaction(_TIMEOUT_S)


def log_ends(bootstrap: str, topic: str) -> tuple[int, int]:
    """``(LSO, high watermark)`` of ``topic``-0, asked of the broker (ListOffsets with each
    isolation level)."""
    ends = []
    for level in ("read_committed", "read_uncommitted"):
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "sluice-test", "isolation.level": level}
        )
        try:
            ends.append(
                consumer.get_watermark_offsets(
                    TopicPartition(topic, 0), timeout=_TIMEOUT_S, cached=False
                )[1]
            )
        finally:
            consumer.close()
    return ends[0], ends[1]


def write_mixed_log(bootstrap: str, topic: str, *, leave_open: bool = True) -> MixedLog:
    """Create ``topic`` (one partition) and write the records of the module doc to it."""
    create_topic(bootstrap, topic, 1)
    log = MixedLog(topic)
    offsets = log.offsets
    txn = _producer(bootstrap, transactional=True)
    _transaction(txn, offsets, topic, ["c0", "c1", "c2"], commit=True)
    _transaction(txn, offsets, topic, ["a0", "a1"], commit=False)
    _send(_producer(bootstrap, transactional=False), offsets, topic, ["p0"])
    _transaction(txn, offsets, topic, ["c3"], commit=True)
    log.committed = ["c0", "c1", "c2", "p0", "c3"]
    log.aborted = ["a0", "a1"]
    if leave_open:
        other = _producer(bootstrap, transactional=True)
        other.begin_transaction()
        _send(other, offsets, topic, ["o0"])
        log.open_producer, log.open_values = other, ["o0"]
        _transaction(txn, offsets, topic, ["c4"], commit=True)
        log.committed.append("c4")
    # A commit returns once the coordinator has decided; the marker after the last record may
    # land a moment later. Wait for both log ends to say what the model says.
    last = offsets["c4" if leave_open else "c3"]
    expected = (offsets["o0"] if leave_open else last + 2, last + 2)
    deadline = time.monotonic() + _TIMEOUT_S
    while (ends := log_ends(bootstrap, topic)) != expected and time.monotonic() < deadline:
        time.sleep(0.1)
    log.lso, log.high_watermark = ends
    assert ends == expected, f"(LSO, high watermark): expected {expected}, found {ends}"
    return log
