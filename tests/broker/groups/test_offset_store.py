"""Committed offsets: durable in __consumer_offsets, replayed, compacted, partitioned like
Kafka (Java's String.hashCode)."""

import asyncio

from sluice.broker.cluster.local_metadata import LocalMetadataStore
from sluice.broker.groups import offset_store
from sluice.broker.groups.offset_store import CommittedOffset, OffsetStore, java_string_hash
from sluice.broker.log.log_manager import LogManager


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
        logs[partition].append(batch)

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
