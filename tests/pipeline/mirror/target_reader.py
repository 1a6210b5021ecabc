"""Reading a mirror's target topic back as a given reader sees it: :func:`read_target` with
``isolation.level`` read_committed (the default: the nightly load's) or read_uncommitted, and
:func:`origins` counting the copies per lineage origin. Unlike ``tests.pipeline.topic_reader``
(which reads up to the high watermark), it ends at the end-of-partition event, so a
transactional topic — whose last offsets are commit markers no record is delivered for — is
read to its end."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, TopicPartition

from sluice.pipeline.lineage import LINEAGE_HEADER, Lineage
from sluice.testing.cluster import QUIET

Origin = tuple[str, str, int, int]


@dataclass(frozen=True)
class Copy:
    """One target record: its position, key, value and lineage origin."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    origin: Origin


def read_target(bootstrap: str, topic: str, isolation: str = "read_committed") -> list[Copy]:
    """Every record of ``topic`` a reader of ``isolation`` sees now: read_committed stops at
    the last stable offset (the end-of-partition event comes there, past the markers)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "eos-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            **QUIET,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        if metadata.error is not None:  # not created yet
            return []
        partitions = sorted(metadata.partitions)
        consumer.assign([TopicPartition(topic, p, -2) for p in partitions])  # beginning
        done: set[int] = set()
        copies: list[Copy] = []
        deadline = time.monotonic() + 60
        while len(done) < len(partitions):
            assert time.monotonic() < deadline, f"{topic}: only {sorted(done)} read to the end"
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        done.add(msg.partition())
                    continue
                lineage = next(v for k, v in msg.headers() or () if k == LINEAGE_HEADER)
                o = Lineage.decode(lineage)
                copies.append(
                    Copy(
                        msg.partition(),
                        msg.offset(),
                        msg.key(),
                        msg.value(),
                        (o.cluster, o.topic, o.partition, o.offset),
                    )  # fmt: skip
                )
        return copies
    finally:
        consumer.close()


def origins(copies: list[Copy]) -> Counter[Origin]:
    """How many copies of each ``(cluster, topic, partition, offset)`` origin."""
    return Counter(c.origin for c in copies)
