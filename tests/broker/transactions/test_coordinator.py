"""``TransactionCoordinator`` against real logs and a host without a network: the state
machine, fencing, markers, pending offsets, timeouts, and recovery from the state log."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from sluice.broker.log.errors import StorageError
from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.records import encode_batch
from sluice.broker.protocol.errors import Errors
from sluice.broker.transactions.coordinator import TopicPartitionKey, TransactionCoordinator
from sluice.broker.transactions.transaction_config import TransactionConfig
from sluice.broker.transactions.transaction_metadata import TransactionState

DATA = ("orders", 0)


class FakeHost:
    """One state partition and one data partition, as logs in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.state_log = Log(directory / "__transaction_state-0", LogConfig())
        self.data = Log(directory / "orders-0", LogConfig())
        self.next_pid = 1000
        self.offsets: dict[tuple[str, str, int], int] = {}
        self.fail_markers = False

    async def next_producer_id(self) -> int:
        self.next_pid += 1
        return self.next_pid

    async def append_state(self, partition: int, batch: bytes) -> None:
        self.state_log.append(batch)

    async def write_markers(
        self, producer_id: int, producer_epoch: int, commit: bool,
        partitions: Sequence[TopicPartitionKey],
    ) -> dict[TopicPartitionKey, Errors]:  # fmt: skip
        if self.fail_markers:
            return dict.fromkeys(partitions, Errors.NOT_LEADER_OR_FOLLOWER)
        for tp in partitions:
            assert tp == DATA
            self.data.append_marker(producer_id, producer_epoch, commit=commit)
        return dict.fromkeys(partitions, Errors.NONE)

    async def commit_offsets(self, group, offsets) -> None:
        for topic, partition, offset, _, _ in offsets:
            self.offsets[(group, topic, partition)] = offset

    def partition_exists(self, topic: str, partition: int) -> bool:
        return (topic, partition) == DATA

    def led_state_partitions(self) -> dict[int, Log]:
        return {0: self.state_log}


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def host(tmp_path):
    h = FakeHost(tmp_path)
    yield h
    h.state_log.close()
    h.data.close()


def coordinator(host, **config) -> TransactionCoordinator:
    c = TransactionCoordinator(host, TransactionConfig(**config), 1)
    return c


def produce(host, pid, epoch, seq=0):
    batch = encode_batch([(b"k", b"v")], producer_id=pid, producer_epoch=epoch,
                         base_sequence=seq, transactional=True)  # fmt: skip
    return host.data.append(batch)


def test_commit_writes_markers_and_applies_pending_offsets(host):
    async def scenario():
        c = coordinator(host)
        await c.sync_partitions()
        code, pid, epoch = await c.init_producer_id("tx", 60_000)
        assert (code, epoch) == (Errors.NONE, 0)
        assert await c.add_partitions("tx", pid, epoch, [DATA]) == {DATA: Errors.NONE}
        produce(host, pid, epoch)
        assert host.data.last_stable_offset == 0
        assert await c.add_offsets("tx", pid, epoch, "g") == Errors.NONE
        assert c.txn_offset_commit("tx", "g", pid, epoch, [("src", 0, 42, -1, None)]) == Errors.NONE
        assert host.offsets == {}
        assert await c.end_txn("tx", pid, epoch, True) == Errors.NONE
        assert host.offsets == {("g", "src", 0): 42}
        assert host.data.last_stable_offset == host.data.log_end_offset == 2
        assert await c.end_txn("tx", pid, epoch, True) == Errors.NONE  # a retry
        assert await c.end_txn("tx", pid, epoch, False) == Errors.INVALID_TXN_STATE
        assert c.state.get("tx").state is TransactionState.COMPLETE_COMMIT

    run(scenario())


def test_reinit_aborts_the_open_transaction_and_fences_the_zombie(host):
    async def scenario():
        c = coordinator(host)
        await c.sync_partitions()
        _, pid, epoch = await c.init_producer_id("tx", 60_000)
        await c.add_partitions("tx", pid, epoch, [DATA])
        produce(host, pid, epoch)
        code, pid2, epoch2 = await c.init_producer_id("tx", 60_000)
        assert (code, pid2, epoch2) == (Errors.NONE, pid, 2)  # aborted at 1, then bumped
        assert [t.producer_id for t in host.data.collect_aborted_transactions(0, 10)] == [pid]
        assert await c.end_txn("tx", pid, epoch, True) == Errors.PRODUCER_FENCED
        assert await c.add_partitions("tx", pid, epoch, [DATA]) == {DATA: Errors.PRODUCER_FENCED}
        with pytest.raises(StorageError):
            produce(host, pid, epoch, seq=1)  # the partition saw epoch 1: the zombie is refused
        code, _, _ = await c.init_producer_id("tx", 60_000, pid, epoch)  # KIP-360, stale
        assert code == Errors.PRODUCER_FENCED

    run(scenario())


def test_timed_out_transactions_are_aborted_with_a_bump(host):
    async def scenario():
        c = coordinator(host)
        await c.sync_partitions()
        _, pid, epoch = await c.init_producer_id("tx", 1_000)
        await c.add_partitions("tx", pid, epoch, [DATA])
        produce(host, pid, epoch)
        start = c.state.get("tx").txn_start_ms
        assert await c.abort_timed_out(start + 999) == []
        assert await c.abort_timed_out(start + 1_001) == ["tx"]
        meta = c.state.get("tx")
        assert (meta.state, meta.producer_epoch) == (TransactionState.COMPLETE_ABORT, epoch + 1)
        assert host.data.last_stable_offset == host.data.log_end_offset

    run(scenario())


def test_a_restarted_coordinator_finishes_a_prepared_commit(host):
    async def scenario():
        c = coordinator(host)
        await c.sync_partitions()
        _, pid, epoch = await c.init_producer_id("tx", 60_000)
        await c.add_partitions("tx", pid, epoch, [DATA])
        await c.add_offsets("tx", pid, epoch, "g")
        c.txn_offset_commit("tx", "g", pid, epoch, [("src", 0, 7, -1, None)])
        produce(host, pid, epoch)
        host.fail_markers = True  # PrepareCommit written, then the "crash"
        assert await c.end_txn("tx", pid, epoch, True) == Errors.NONE
        assert c.state.get("tx").state is TransactionState.PREPARE_COMMIT
        host.fail_markers = False
        again = coordinator(host)  # a new coordinator reads the state log
        await again.sync_partitions()
        assert again.state.get("tx").state is TransactionState.COMPLETE_COMMIT
        assert host.offsets == {("g", "src", 0): 7}
        assert host.data.last_stable_offset == host.data.log_end_offset

    run(scenario())


def test_an_open_transaction_with_offsets_is_aborted_on_recovery(host):
    async def scenario():
        c = coordinator(host)
        await c.sync_partitions()
        _, pid, epoch = await c.init_producer_id("tx", 60_000)
        await c.add_partitions("tx", pid, epoch, [DATA])
        await c.add_offsets("tx", pid, epoch, "g")
        produce(host, pid, epoch)
        again = coordinator(host)
        await again.sync_partitions()
        meta = again.state.get("tx")
        assert (meta.state, meta.producer_epoch) == (TransactionState.COMPLETE_ABORT, epoch + 1)
        assert await again.end_txn("tx", pid, epoch, True) == Errors.PRODUCER_FENCED

    run(scenario())


def test_requests_are_checked(host):
    async def scenario():
        c = coordinator(host, max_timeout_ms=10_000)
        assert (await c.init_producer_id("tx", 1_000))[0] == Errors.NOT_COORDINATOR
        await c.sync_partitions()
        assert (await c.init_producer_id("tx", 20_000))[0] == Errors.INVALID_TRANSACTION_TIMEOUT
        _, pid, epoch = await c.init_producer_id("tx", 1_000)
        result = await c.add_partitions("tx", pid, epoch, [DATA, ("nope", 0)])
        assert result == {DATA: Errors.OPERATION_NOT_ATTEMPTED,
                          ("nope", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}  # fmt: skip
        assert await c.end_txn("tx", pid, epoch, True) == Errors.INVALID_TXN_STATE
        assert await c.end_txn("tx", pid + 1, epoch, True) == Errors.INVALID_PRODUCER_ID_MAPPING
        assert c.txn_offset_commit("tx", "g", pid, epoch, []) == Errors.INVALID_TXN_STATE

    run(scenario())
