"""``__consumer_offsets`` in Kafka's binary format through a real broker: offsets committed
with confluent-kafka survive a restart; one record of the segment file decoded by hand against
Kafka's schemas (OffsetCommitKey v1, OffsetCommitValue v3); a JSON log of an older Sluice is
migrated at startup."""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from sluice.broker.log.log_manager import LogManager
from sluice.broker.log.records import encode_batch, read_varint

from .broker_process import StartBroker
from .clients import consumer, unique

pytestmark = pytest.mark.broker

BATCH_HEADER = 61  # a magic-2 batch header, up to and including RecordCount


def _commit(bootstrap: str, group: str, offsets: list[TopicPartition]) -> None:
    c = consumer(bootstrap, group_id=group)
    try:
        c.commit(offsets=offsets, asynchronous=False)
    finally:
        c.close()


def _committed(bootstrap: str, group: str, topic: str, partitions: list[int]) -> list[int]:
    c = consumer(bootstrap, group_id=group)
    try:
        found = c.committed([TopicPartition(topic, p) for p in partitions], timeout=10)
        return [tp.offset for tp in found]
    finally:
        c.close()


def _string(data: bytes, pos: int) -> tuple[str, int]:
    (size,) = struct.unpack_from(">h", data, pos)
    return data[pos + 2 : pos + 2 + size].decode(), pos + 2 + size


def _first_record(segment: Path) -> tuple[bytes, bytes]:
    """The key and value of the first record of the first batch, parsed by hand (Kafka's
    record format: varint length, attributes, timestamp delta, offset delta, key, value)."""
    data = segment.read_bytes()
    (attributes,) = struct.unpack_from(">h", data, 21)
    assert attributes & 0x07 == 0, "expected an uncompressed batch"
    pos = BATCH_HEADER
    _length, pos = read_varint(data, pos)
    pos += 1  # attributes
    _ts_delta, pos = read_varint(data, pos)
    _offset_delta, pos = read_varint(data, pos)
    key_size, pos = read_varint(data, pos)
    key, pos = data[pos : pos + key_size], pos + key_size
    value_size, pos = read_varint(data, pos)
    return key, data[pos : pos + value_size]


def test_offsets_survive_a_restart_in_kafkas_binary_format(start_broker: StartBroker) -> None:
    broker = start_broker()
    topic, group = unique("fmt"), unique("fmt-group")
    broker.create_topic(topic, 2)
    before = int(time.time() * 1000)
    _commit(broker.bootstrap, group, [TopicPartition(topic, 0, 42, "meta"),
                                      TopicPartition(topic, 1, 7)])  # fmt: skip
    broker.restart()
    assert _committed(broker.bootstrap, group, topic, [0, 1]) == [42, 7]
    broker.stop()

    key, value = _first_record(broker.log_dir / "__consumer_offsets-0" / f"{0:020d}.log")
    (key_version,) = struct.unpack_from(">h", key, 0)
    assert key_version == 1  # an offset commit (2 would be group metadata)
    got_group, pos = _string(key, 2)
    got_topic, pos = _string(key, pos)
    (partition,) = struct.unpack_from(">i", key, pos)
    assert (got_group, got_topic, partition, pos + 4) == (group, topic, 0, len(key))

    value_version, offset, leader_epoch = struct.unpack_from(">hqi", value, 0)
    metadata, pos = _string(value, 14)
    (commit_timestamp,) = struct.unpack_from(">q", value, pos)
    # confluent-kafka sends the metadata string with its C terminator; stored as sent.
    assert (value_version, offset, leader_epoch, metadata) == (3, 42, -1, "meta\x00")
    assert before <= commit_timestamp <= int(time.time() * 1000)
    assert pos + 8 == len(value)


def test_a_json_offsets_log_of_an_older_sluice_is_migrated(start_broker: StartBroker) -> None:
    broker = start_broker()
    topic, group = unique("legacy"), unique("legacy-group")
    broker.create_topic(topic, 2)
    broker.stop()
    # What an older Sluice wrote: JSON keys and values.
    manager = LogManager([broker.log_dir])
    manager.startup()
    records = []
    for partition, offset in ((0, 11), (1, 22)):
        key = {"version": 1, "group": group, "topic": topic, "partition": partition}
        value = {"version": 1, "offset": offset, "leader_epoch": -1, "metadata": None,
                 "commit_timestamp": 1}  # fmt: skip
        records.append((json.dumps(key).encode(), json.dumps(value).encode()))
    manager.get_or_create_log("__consumer_offsets", 0).append(
        encode_batch(records, timestamps=[1, 1])
    )
    manager.shutdown()

    broker.start()
    assert "JSON offset record(s)" in broker.output()
    assert _committed(broker.bootstrap, group, topic, [0, 1]) == [11, 22]
    _commit(broker.bootstrap, group, [TopicPartition(topic, 1, 23)])
    broker.restart()
    assert _committed(broker.bootstrap, group, topic, [0, 1]) == [11, 23]
    broker.stop()
    # Rewritten in binary at the first startup: no JSON key is left in the live log.
    for segment in (broker.log_dir / "__consumer_offsets-0").glob("*.log"):
        assert b'{"version"' not in segment.read_bytes()
