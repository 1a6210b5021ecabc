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
from sluice.broker.transactions import coordinator as coordinator_module
from sluice.broker.transactions.coordinator import TopicPartitionKey, TransactionCoordinator
from sluice.broker.transactions.marker_channel import TxnMarker
from sluice.broker.transactions.transaction_config import TransactionConfig
from sluice.broker.transactions.transaction_metadata import TransactionState
from sluice.broker.transactions.transaction_state_manager import TransactionStateWriteError

DATA = ("orders", 0)
OFFSETS = ("__consumer_offsets", 0)


class FakeHost:
    """One state partition and one data partition, as logs in ``directory``; the markers for
    ``__consumer_offsets`` are recorded in ``group_markers``."""

    def __init__(self, directory: Path) -> None:
        self.state_log = Log(directory / "__transaction_state-0", LogConfig())
        self.data = Log(directory / "orders-0", LogConfig())
        self.next_pid = 1000
        self.offsets: dict[tuple[str, str, int], int] = {}
        self.fail_markers = False
        self.fail_state = False
        self.leader_epoch = 0
        self.leading = True
        self.markers: list[TxnMarker] = []
        self.group_markers: list[tuple[TopicPartitionKey, TxnMarker]] = []

    async def next_producer_id(self) -> int:
        self.next_pid += 1
        return self.next_pid

    async def append_state(self, partition: int, batch: bytes) -> None:
        if self.fail_state:
            raise TransactionStateWriteError("the ISR of __transaction_state-0 is too small")
        self.state_log.append(batch)

    async def write_markers(
        self, marker: TxnMarker, partitions: Sequence[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, Errors]:
        if self.fail_markers:
            return dict.fromkeys(partitions, Errors.NOT_LEADER_OR_FOLLOWER)
        self.markers.append(marker)
        for tp in partitions:
            if tp == OFFSETS:
                self.group_markers.append((tp, marker))
                continue
            assert tp == DATA
            self.data.append_marker(
                marker.producer_id, marker.producer_epoch, commit=marker.commit,
                coordinator_epoch=marker.coordinator_epoch,
            )  # fmt: skip
        return dict.fromkeys(partitions, Errors.NONE)

    def group_partition(self, group: str) -> TopicPartitionKey:
        return OFFSETS

    async def commit_offsets(self, group, offsets) -> None:
        for topic, partition, offset, _, _ in offsets:
            self.offsets[(group, topic, partition)] = offset

    def partition_exists(self, topic: str, partition: int) -> bool:
        return (topic, partition) == DATA

    def led_state_partitions(self) -> dict[int, tuple[Log, int]]:
        return {0: (self.state_log, self.leader_epoch)} if self.leading else {}


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
        host.leading = False
        assert (await c.init_producer_id("tx", 1_000))[0] == Errors.NOT_COORDINATOR
        host.leading = True  # a request loads a partition led since the last sync

        assert (await c.init_producer_id("tx", 20_000))[0] == Errors.INVALID_TRANSACTION_TIMEOUT
        _, pid, epoch = await c.init_producer_id("tx", 1_000)
        result = await c.add_partitions("tx", pid, epoch, [DATA, ("nope", 0)])
        assert result == {DATA: Errors.OPERATION_NOT_ATTEMPTED,
                          ("nope", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}  # fmt: skip
        assert await c.end_txn("tx", pid, epoch, True) == Errors.INVALID_TXN_STATE
        assert await c.end_txn("tx", pid + 1, epoch, True) == Errors.INVALID_PRODUCER_ID_MAPPING
        assert c.txn_offset_commit("tx", "g", pid, epoch, []) == Errors.INVALID_TXN_STATE

    run(scenario())


def test_a_state_write_that_is_not_durable_answers_coordinator_not_available(host, caplog):
    """InitProducerId, AddPartitionsToTxn and EndTxn whose ``__transaction_state`` write fails
    answer COORDINATOR_NOT_AVAILABLE (the client retries), say why, and change nothing."""

    async def scenario():
        c = coordinator(host)
        await c.sync_partitions()
        host.fail_state = True
        assert await c.init_producer_id("tx", 60_000) == (Errors.COORDINATOR_NOT_AVAILABLE, -1, -1)
        assert c.state.get("tx") is None
        host.fail_state = False
        _, pid, epoch = await c.init_producer_id("tx", 60_000)
        host.fail_state = True
        result = await c.add_partitions("tx", pid, epoch, [DATA])
        assert result == {DATA: Errors.COORDINATOR_NOT_AVAILABLE}
        assert c.state.get("tx").state is TransactionState.EMPTY
        host.fail_state = False
        assert await c.add_partitions("tx", pid, epoch, [DATA]) == {DATA: Errors.NONE}
        host.fail_state = True
        assert await c.end_txn("tx", pid, epoch, True) == Errors.COORDINATOR_NOT_AVAILABLE
        assert c.state.get("tx").state is TransactionState.ONGOING
        host.fail_state = False
        assert await c.end_txn("tx", pid, epoch, True) == Errors.NONE

    with caplog.at_level("WARNING"):
        run(scenario())
    for what in ("InitProducerId of 'tx'", "transactional id 'tx'", "EndTxn of 'tx'"):
        assert f"{what}: the ISR of __transaction_state-0 is too small" in caplog.text


def test_offsets_bring_the_group_partition_and_markers_carry_the_coordinator_epoch(host):
    async def scenario():
        host.leader_epoch = 4
        c = coordinator(host)
        _, pid, epoch = await c.init_producer_id("tx", 60_000)
        await c.add_partitions("tx", pid, epoch, [DATA])
        assert await c.add_offsets("tx", pid, epoch, "g") == Errors.NONE
        assert c.state.get("tx").partitions == {DATA, OFFSETS}
        assert await c.end_txn("tx", pid, epoch, True) == Errors.NONE
        assert host.group_markers == [(OFFSETS, TxnMarker(pid, epoch, True, 4))]
        # A new leader epoch of the state partition (failover and back): reloaded, and the
        # next markers carry the new epoch.
        host.leader_epoch = 6
        await c.sync_partitions()
        assert c.state.coordinator_epoch("tx") == 6
        await c.add_partitions("tx", pid, epoch, [DATA])
        assert await c.end_txn("tx", pid, epoch, False) == Errors.NONE
        assert host.markers[-1] == TxnMarker(pid, epoch, False, 6)
        host.leading = False  # leadership moved away: forgotten
        await c.sync_partitions()
        assert c.state.get("tx") is None
        assert await c.end_txn("tx", pid, epoch, True) == Errors.NOT_COORDINATOR

    run(scenario())


def test_failed_markers_are_retried_and_block_a_reinit_meanwhile(host, monkeypatch):
    monkeypatch.setattr(coordinator_module, "RETRY_BACKOFF_S", (0.01, 0.02))

    async def scenario():
        c = coordinator(host)
        _, pid, epoch = await c.init_producer_id("tx", 60_000)
        await c.add_partitions("tx", pid, epoch, [DATA])
        produce(host, pid, epoch)
        host.fail_markers = True
        assert await c.end_txn("tx", pid, epoch, True) == Errors.NONE  # PrepareCommit is durable
        assert c.state.get("tx").state is TransactionState.PREPARE_COMMIT
        assert (await c.init_producer_id("tx", 60_000))[0] == Errors.CONCURRENT_TRANSACTIONS
        host.fail_markers = False
        for _ in range(100):
            await asyncio.sleep(0.01)
            if c.state.get("tx").state is TransactionState.COMPLETE_COMMIT:
                break
        assert c.state.get("tx").state is TransactionState.COMPLETE_COMMIT
        assert host.data.last_stable_offset == host.data.log_end_offset
        c.close()

    run(scenario())


def test_idle_transactional_ids_expire_with_a_tombstone(host):
    """Kafka's ``removeExpiredTransactionalIds``: only ids with no transaction open or being
    ended, idle for ``transactional.id.expiration.ms``; a reload does not bring them back."""

    async def scenario():
        c = coordinator(host, id_expiration_ms=1_000)
        await c.sync_partitions()
        _, done_pid, _ = await c.init_producer_id("done", 60_000)
        _, pid, epoch = await c.init_producer_id("open", 60_000)
        await c.add_partitions("open", pid, epoch, [DATA])
        produce(host, pid, epoch)
        _, idle_pid, idle_epoch = await c.init_producer_id("idle-commit", 60_000)
        await c.add_partitions("idle-commit", idle_pid, idle_epoch, [DATA])
        await c.end_txn("idle-commit", idle_pid, idle_epoch, True)
        start = c.state.get("done").last_update_ms
        assert await c.remove_expired(start + 999) == []
        later = max(m.last_update_ms for m in c.state.all()) + 1_000
        assert sorted(await c.remove_expired(later)) == ["done", "idle-commit"]
        assert c.state.get("done") is None and c.state.get("open") is not None
        # The tombstones are in the state log: a coordinator that loads it has only "open".
        again = coordinator(host, id_expiration_ms=1_000)
        await again.sync_partitions()
        assert [m.transactional_id for m in again.state.all()] == ["open"]
        # A producer coming back with an expired id gets a new producer id.
        code, new_pid, new_epoch = await again.init_producer_id("done", 60_000)
        assert (code, new_epoch) == (Errors.NONE, 0) and new_pid != done_pid

    run(scenario())


def test_expiry_settings_under_kafkas_keys():
    config = TransactionConfig.from_properties({
        "transactional.id.expiration.ms": "5000",
        "transaction.remove.expired.transaction.cleanup.interval.ms": "100",
    })  # fmt: skip
    assert (config.id_expiration_ms, config.remove_expired_interval_ms) == (5_000, 100)
    assert TransactionConfig().id_expiration_ms == 7 * 24 * 3600 * 1000
