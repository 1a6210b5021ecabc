"""Committed offsets: durable in __consumer_offsets, replayed, compacted, partitioned like
Kafka (Java's String.hashCode); a JSON log of an older Sluice migrated; group metadata."""

import asyncio
import json

import pytest

from sluice.broker.cluster.local_metadata import LocalMetadataStore
from sluice.broker.groups import offset_store
from sluice.broker.groups.offset_store import (
    CommittedOffset,
    OffsetsPartitionLoadError,
    OffsetStore,
    java_string_hash,
)
from sluice.broker.groups.offsets_topic_records import (
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    decode_key,
    encode_key,
    is_legacy_json,
)
from sluice.broker.log.log_manager import LogManager
from sluice.broker.log.records import decode_batch, encode_batch


def test_java_string_hash_matches_java():
    # Values printed by `javac`/`java` on this machine's JDK 17.
    assert java_string_hash("my-group") == -1906497762
    assert java_string_hash("console-consumer-12345") == 158455506
    assert java_string_hash("été-😀") == -1803456526  # UTF-16 surrogates, as Java hashes them


def open_store(tmp_path, partitions=3):
    """A store over local logs, loaded as a standalone broker loads it: every partition, as
    its only replica (so a mostly stale one is compacted)."""
    manager = LogManager([tmp_path / "logs"])
    manager.startup()
    metadata = LocalMetadataStore(tmp_path / "logs", 0)
    if metadata.get(offset_store.TOPIC) is None:
        metadata.create_topic(offset_store.TOPIC, partitions, 1, {}, internal=True)
    logs = [manager.get_or_create_log(offset_store.TOPIC, p) for p in range(partitions)]

    async def append(partition, batch):
        return logs[partition].append(batch).first_offset

    store = OffsetStore(partitions, append)
    for p, partition_log in enumerate(logs):
        store.load_partition(p, partition_log, compact=True)
    return manager, store


def test_commits_survive_a_restart_and_deletes_too(tmp_path):
    manager, store = open_store(tmp_path)
    c1 = CommittedOffset(42, 3, "meta", 1000)
    asyncio.run(store.commit("g1", [("t", 0, c1), ("t", 1, CommittedOffset(7, -1, None, 1))]))
    asyncio.run(store.commit("g2", [("t", 0, CommittedOffset(1, -1, None, 1))]))
    asyncio.run(store.delete("g2", [("t", 0)]))
    manager.shutdown()
    manager, again = open_store(tmp_path)
    assert again.fetch("g1", "t", 0) == c1
    assert again.committed("g1") == {("t", 0): c1, ("t", 1): CommittedOffset(7, -1, None, 1)}
    assert again.groups() == {"g1"}
    manager.shutdown()


def test_a_mostly_stale_partition_is_compacted_at_startup(tmp_path, monkeypatch):
    monkeypatch.setattr(offset_store, "COMPACT_SLACK", 10)
    manager, store = open_store(tmp_path, partitions=1)
    for i in range(100):
        asyncio.run(store.commit("g", [("t", 0, CommittedOffset(i, -1, None, i))]))
    manager.shutdown()
    manager, again = open_store(tmp_path, partitions=1)
    log = manager.get_log("__consumer_offsets", 0)
    assert log.log_start_offset == 100  # the 100 stale commits are behind the log start
    assert again.fetch("g", "t", 0).offset == 99
    manager.shutdown()
    manager, third = open_store(tmp_path, partitions=1)
    assert third.fetch("g", "t", 0).offset == 99
    manager.shutdown()


def test_load_and_unload_follow_leadership(tmp_path):
    manager, store = open_store(tmp_path, partitions=2)
    group = next(g for g in ("a", "b", "c", "d") if store.partition_for(g) == 1)
    asyncio.run(store.commit(group, [("t", 0, CommittedOffset(5, -1, None, 0))]))
    assert store.coordinates(group)
    store.unload_partition(1)
    assert store.fetch(group, "t", 0) is None and 1 not in store.loaded
    assert not store.coordinates(group)  # leadership moved: another broker coordinates it
    store.load_partition(1, manager.get_log("__consumer_offsets", 1))
    assert store.fetch(group, "t", 0).offset == 5
    assert store.coordinates(group)
    manager.shutdown()


def test_a_partition_with_followers_is_never_compacted(tmp_path, monkeypatch):
    monkeypatch.setattr(offset_store, "COMPACT_SLACK", 10)
    manager, store = open_store(tmp_path, partitions=1)
    for i in range(100):
        asyncio.run(store.commit("g", [("t", 0, CommittedOffset(i, -1, None, i))]))
    log = manager.get_log("__consumer_offsets", 0)
    store.unload_partition(0)
    assert store.load_partition(0, log) == 1  # compact=False: a replicated partition
    assert (log.log_start_offset, log.log_end_offset) == (0, 100)
    assert store.fetch("g", "t", 0).offset == 99
    manager.shutdown()


def _legacy_batch(entries):
    """Sluice's old JSON records, as it wrote them before the binary format."""
    records = []
    for (group, topic, partition), value in entries:
        key = json.dumps({"version": 1, "group": group, "topic": topic, "partition": partition})
        records.append((key.encode(), None if value is None else json.dumps(value).encode()))
    return encode_batch(records, timestamps=[0] * len(records))


def _raw_records(partition_log):
    found = []
    for header, raw in OffsetStore._batches(partition_log):
        found += [(r.key, r.value) for r in decode_batch(raw, header.position)]
    return found


def _json_value(offset):
    return {"version": 1, "offset": offset, "leader_epoch": -1, "metadata": None,
            "commit_timestamp": 5}  # fmt: skip


def test_a_json_log_is_migrated_at_once_on_a_standalone_broker(tmp_path):
    manager, store = open_store(tmp_path, partitions=1)
    log = manager.get_log(offset_store.TOPIC, 0)
    log.append(_legacy_batch([(("g", "t", 0), _json_value(3)), (("g", "t", 1), _json_value(4)),
                              (("g", "t", 1), None), (("h", "t", 0), _json_value(8))]))  # fmt: skip
    manager.shutdown()
    manager, again = open_store(tmp_path, partitions=1)
    assert again.committed("g") == {("t", 0): CommittedOffset(3, -1, None, 5)}
    assert again.fetch("h", "t", 0).offset == 8
    records = _raw_records(manager.get_log(offset_store.TOPIC, 0))
    assert records and all(not is_legacy_json(k) for k, _ in records)  # rewritten in binary
    assert {decode_key(k) for k, _ in records} == {
        OffsetCommitKey("g", "t", 0),
        OffsetCommitKey("h", "t", 0),
    }
    manager.shutdown()
    manager, third = open_store(tmp_path, partitions=1)
    assert third.fetch("g", "t", 0).offset == 3
    manager.shutdown()


def test_a_json_log_with_followers_is_migrated_with_its_next_write(tmp_path):
    manager, store = open_store(tmp_path, partitions=1)
    log = manager.get_log(offset_store.TOPIC, 0)
    log.append(_legacy_batch([(("g", "t", 0), _json_value(3)), (("h", "t", 0), _json_value(1))]))
    store.unload_partition(0)
    store.load_partition(0, log)  # compact=False: the partition has followers
    assert store.fetch("g", "t", 0).offset == 3
    asyncio.run(store.commit("h", [("t", 0, CommittedOffset(2, -1, None, 6))]))
    migrated = _raw_records(log)[2:]
    json_keys = [k for k, v in migrated if is_legacy_json(k)]
    assert len(json_keys) == 2 and all(
        v is None for k, v in migrated if is_legacy_json(k)
    )  # tombstones: compaction drops the JSON records
    store.unload_partition(0)
    store.load_partition(0, log)
    assert store.fetch("g", "t", 0).offset == 3 and store.fetch("h", "t", 0).offset == 2
    # Once compacted away, the JSON records are not needed: the binary ones carry everything.
    binary = [(k, v) for k, v in _raw_records(log) if not is_legacy_json(k)]
    assert {decode_key(k) for k, _ in binary} == {
        OffsetCommitKey("g", "t", 0),
        OffsetCommitKey("h", "t", 0),
    }
    manager.shutdown()


def test_group_metadata_is_stored_and_read_back(tmp_path):
    manager, store = open_store(tmp_path, partitions=2)
    member = MemberMetadata("m", "inst", "c", "/h", 1000, 1000, b"s", b"a")
    value = GroupMetadataValue("consumer", 3, "range", "m", 77, (member,))
    asyncio.run(store.store_group("g", value))
    asyncio.run(store.store_group("gone", value))
    asyncio.run(store.store_group("gone", None))
    manager.shutdown()
    manager, again = open_store(tmp_path, partitions=2)
    assert again.group_metadata("g") == value and again.group_metadata("gone") is None
    manager.shutdown()


def test_a_corrupt_record_names_the_partition_and_offset(tmp_path):
    manager, store = open_store(tmp_path, partitions=1)
    log = manager.get_log(offset_store.TOPIC, 0)
    key = encode_key(OffsetCommitKey("g", "t", 0))
    log.append(encode_batch([(key, b"\x00\x03\x00")], timestamps=[0]))
    store.unload_partition(0)
    with pytest.raises(OffsetsPartitionLoadError, match="__consumer_offsets-0 offset 0"):
        store.load_partition(0, log)
    manager.shutdown()
