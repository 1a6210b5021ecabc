"""Reading a whole topic back in tests: :func:`read_all` returns every record up to each
partition's high watermark as a :class:`Record` (with its lineage origin, when it has one)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from sluice.pipeline.lineage import LINEAGE_HEADER, Lineage
from sluice.testing.cluster import QUIET


@dataclass(frozen=True)
class Record:
    """One record read back from a topic."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_type: int  # confluent_kafka.TIMESTAMP_CREATE_TIME / _LOG_APPEND_TIME
    timestamp: int  # ms since the epoch

    @property
    def lineage(self) -> Lineage | None:
        for k, v in self.headers:
            if k == LINEAGE_HEADER and v is not None:
                return Lineage.decode(v)
        return None


def read_all(bootstrap: str, topic: str, timeout: float = 30.0) -> list[Record]:
    """Every record of ``topic`` now (up to each partition's high watermark), in partition and
    offset order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "test-topic-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            **QUIET,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        assert metadata.error is None, f"{topic}: {metadata.error}"
        ends: dict[int, int] = {}
        starts = []
        for p in sorted(metadata.partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high > low:
                ends[p] = high
                starts.append(TopicPartition(topic, p, low))
        records: list[Record] = []
        if not starts:
            return records
        consumer.assign(starts)
        deadline = time.monotonic() + timeout
        positions = {tp.partition: tp.offset for tp in starts}
        while any(positions[p] < ends[p] for p in ends):
            assert time.monotonic() < deadline, f"{topic}: read {positions}, expected {ends}"
            batch: list[Any] = consumer.consume(1000, 0.5)
            for msg in batch:
                if msg.error() is not None or msg.offset() >= ends[msg.partition()]:
                    continue
                positions[msg.partition()] = msg.offset() + 1
                records.append(
                    Record(
                        msg.topic(),
                        msg.partition(),
                        msg.offset(),
                        msg.key(),
                        msg.value(),
                        tuple(msg.headers() or ()),
                        *msg.timestamp(),
                    )
                )
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()
