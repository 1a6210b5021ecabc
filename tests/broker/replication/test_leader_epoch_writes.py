"""Leader epochs written off the event loop: the leader's at takeover, the follower's from
the headers of what it fetched — and the appends after them finding nothing left to write."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from sluice.broker.cluster.local_metadata import LocalMetadataStore
from sluice.broker.cluster.single_broker import SingleBrokerCluster
from sluice.broker.log.leader_epoch_cache import LeaderEpochCache
from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.log_manager import LogManager
from sluice.broker.log.records import encode_batch
from sluice.broker.protocol.errors import Errors
from sluice.broker.replication.replica_fetcher import new_epochs
from sluice.broker.replication.replica_manager import ReplicaManager


def record_writers(cache: LeaderEpochCache) -> list[str]:
    """The names of the threads that write ``cache``'s file from now on (the writes still
    happen: this only notes who makes them)."""
    names: list[str] = []
    write: Callable[[], None] = cache._write

    def noted() -> None:
        names.append(threading.current_thread().name)
        write()

    cache._write = noted  # type: ignore[method-assign]
    return names


def test_a_leader_writes_its_epoch_off_the_loop_and_the_append_writes_nothing(tmp_path):
    store = LocalMetadataStore(tmp_path / "logs", 7)
    cluster = SingleBrokerCluster(store, 7, listener_host="h", listener_port=9)
    cluster.create_topic("t", 1, 1, {})
    manager = LogManager([tmp_path / "logs"])
    manager.startup()
    log = manager.get_or_create_log("t", 0)
    writers = record_writers(log.leader_epochs)
    replicas = ReplicaManager(7, cluster, manager.get_or_create_log, manager.delete_log)

    async def scenario() -> None:
        replicas.start()  # takes the lead: the epoch's write starts on a worker thread
        batch = encode_batch([(b"k", b"v")] * 3)
        result = await replicas.append("t", 0, batch, acks=-1, timeout_ms=1000)
        assert result.error is Errors.NONE and log.log_end_offset == 3
        result = await replicas.append("t", 0, batch, acks=1, timeout_ms=1000)
        assert result.error is Errors.NONE and log.log_end_offset == 6
        await replicas.stop()

    asyncio.run(scenario())
    assert log.leader_epochs.entries == [(0, 0)] and log.leader_epochs.written
    assert writers and all(name.startswith("leader-epoch-writer") for name in writers), writers
    manager.shutdown()


def stamped(*batches: tuple[int, int, int]) -> bytes:
    """Batches as a leader sends them: (base offset, leader epoch, records) each."""
    out = bytearray()
    for base, epoch, count in batches:
        batch = bytearray(encode_batch([(b"k", b"v")] * count))
        batch[0:8] = base.to_bytes(8, "big")
        batch[12:16] = epoch.to_bytes(4, "big")  # outside the CRC, as the leader writes it
        out += batch
    return bytes(out)


def test_a_follower_finds_the_epochs_a_fetch_starts_and_writes_them_first(tmp_path):
    follower = Log(tmp_path / "t-0", LogConfig())
    records = stamped((0, 2, 3), (3, 2, 1), (4, 5, 2), (6, 7, 1))
    assert new_epochs(follower, records) == [(2, 0), (5, 4), (7, 6)]
    writers = record_writers(follower.leader_epochs)
    worker = threading.Thread(
        target=follower.leader_epochs.assign_all,
        args=(new_epochs(follower, records),),
        name="leader-epoch-writer-test",
    )
    worker.start()
    worker.join()
    follower.append(records, assign=False)  # on the "loop": finds every epoch written
    assert writers == ["leader-epoch-writer-test"]
    assert follower.leader_epochs.entries == [(2, 0), (5, 4), (7, 6)]
    assert new_epochs(follower, stamped((7, 7, 1), (8, 8, 1))) == [(8, 8)]
    assert new_epochs(follower, b"") == []
    follower.close()
