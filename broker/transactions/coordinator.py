"""``TransactionCoordinator``: KIP-98's coordinator — producer ids and epochs for
transactional ids, the partitions and groups of each transaction, and its end (Kafka's
``TransactionCoordinator`` with the marker writing of ``TransactionMarkerChannelManager``).

Requests (each answers a Kafka error code, :class:`~sluice.broker.protocol.errors.Errors`):

* ``init_producer_id``: a new id gets a producer id at epoch 0; a known one has its epoch
  bumped (a new producer id once the epoch is exhausted), which fences the previous
  producer — an open transaction of the old epoch is first aborted, with the epoch bumped
  for its markers (so every partition fences the zombie). KIP-360: a request that names its
  current producer id and epoch must match them, else PRODUCER_FENCED.
* ``add_partitions``, ``add_offsets``: register the transaction's partitions / groups;
  Empty or Complete* become Ongoing (the transaction's timeout starts). A group brings its
  ``__consumer_offsets`` partition into the transaction (Kafka's AddOffsetsToTxn): the
  marker goes there too, and commits or drops the producer's transactional offsets the group
  coordinator appended there (``OffsetStore.commit_txn`` / ``complete_txn``).
* ``txn_offset_commit``: TxnOffsetCommit goes to the *group* coordinator, which always
  appends the offsets to the group's ``__consumer_offsets`` partition as a transactional
  batch (durable; the marker commits them there). When that broker is also the transaction's
  coordinator (a standalone broker always), they are also held here, written with
  PrepareCommit and committed again by :meth:`_complete` (the same offsets).
* ``end_txn``: write Prepare*, the markers to every partition (``TransactionMarkerChannel``
  in cluster mode: to each partition's leader, retried as leaders move), apply (commit) or
  drop (abort) the pending offsets held here, write Complete*. A retried EndTxn of the same
  outcome answers NONE; the other outcome INVALID_TXN_STATE. Markers still failing when the
  channel gives up leave the transaction prepared: a retry task resends them with backoff,
  and requests for the id meanwhile answer CONCURRENT_TRANSACTIONS.
* Markers carry the **coordinator epoch**: the leader epoch of the id's state partition when
  this broker loaded it (``TransactionStateManager``).
* **Failover**: every second (:meth:`run`), and before answering NOT_COORDINATOR, the state
  partitions this broker came to lead — or leads at a new leader epoch — are loaded
  (:meth:`sync_partitions`), those it lost are forgotten. Each Prepare* found is finished (a
  coordinator that died between Prepare* and Complete*: the same outcome, so the producer's
  retried EndTxn is answered NONE); each Ongoing transaction that had registered a group is
  aborted with a bump: offsets it may have held here were in the dead coordinator's memory,
  so committing it could lose them — the producer is fenced instead. An Ongoing transaction
  without groups stays open for its producer (or its timeout).
* Every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` the transactions open
  longer than their ``transaction.timeout.ms`` are aborted with an epoch bump (the producer
  is fenced), and prepared ones are retried.
* **Expiry** (Kafka's ``removeExpiredTransactionalIds``): every
  ``transaction.remove.expired.transaction.cleanup.interval.ms`` the ids in Empty,
  CompleteCommit or CompleteAbort — no transaction open or being ended — whose last change is
  ``transactional.id.expiration.ms`` old or older are removed: a tombstone in
  ``__transaction_state``, then forgotten. A producer that comes back with the id gets a new
  producer id from InitProducerId.

A fenced producer gets PRODUCER_FENCED; the handlers answer INVALID_PRODUCER_EPOCH to the
request versions older than KIP-588's.

Markers and pending offsets go through the :class:`CoordinatorHost` the broker provides,
so this package needs nothing of the server. Thread safety: used on the broker's event
loop; each transactional id's requests are serialized by its own ``asyncio.Lock``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Protocol

from sluice.broker.log.log import Log
from sluice.broker.protocol.errors import Errors
from sluice.broker.transactions.marker_channel import TxnMarker
from sluice.broker.transactions.transaction_config import TransactionConfig
from sluice.broker.transactions.transaction_metadata import (
    MAX_EPOCH,
    TransactionMetadata,
    TransactionState,
)
from sluice.broker.transactions.transaction_state_manager import (
    TransactionStateManager,
    TransactionStateWriteError,
)

log = logging.getLogger(__name__)

#: How often the led state partitions are compared with the loaded ones (failover).
SYNC_INTERVAL_S = 1.0
#: Backoff of the retry task of a transaction whose markers failed: first, then the most.
RETRY_BACKOFF_S = (0.5, 5.0)

TopicPartitionKey = tuple[str, int]
_S = TransactionState
#: Kafka's ``isExpirationAllowed``: no transaction open or being ended.
_EXPIRABLE = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})


def _state_write_failed(what: str, exc: TransactionStateWriteError) -> Errors:
    """The answer to a request whose ``__transaction_state`` write was not made durable
    (logged with ``what``): COORDINATOR_NOT_AVAILABLE, as Kafka's TransactionStateManager
    answers when the append did not replicate (NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT). The
    client looks the coordinator up again and retries; the state was not changed."""
    log.warning("%s: %s", what, exc)
    return Errors.COORDINATOR_NOT_AVAILABLE


class CoordinatorHost(Protocol):
    """What the coordinator needs of its broker."""

    async def next_producer_id(self) -> int: ...

    async def append_state(self, partition: int, batch: bytes) -> None:
        """Durably append to ``__transaction_state``; TransactionStateWriteError if not."""
        ...

    async def write_markers(
        self, marker: TxnMarker, partitions: Sequence[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, Errors]:
        """Deliver the marker to each partition's leader; each one's final answer."""
        ...

    def group_partition(self, group: str) -> TopicPartitionKey:
        """The ``__consumer_offsets`` partition holding ``group``."""
        ...

    async def commit_offsets(
        self, group: str, offsets: Sequence[tuple[str, int, int, int, str | None]]
    ) -> None:
        """Make (topic, partition, offset, leader epoch, metadata)s the group's committed
        offsets, durably."""
        ...

    def partition_exists(self, topic: str, partition: int) -> bool: ...

    def led_state_partitions(self) -> dict[int, tuple[Log, int]]:
        """The ``__transaction_state`` partitions this broker leads, with their logs and
        leader epochs."""
        ...


def now_ms() -> int:
    return int(time.time() * 1000)


def _check_producer(meta: TransactionMetadata | None, pid: int, epoch: int) -> Errors:
    if meta is None or meta.producer_id != pid:
        return Errors.INVALID_PRODUCER_ID_MAPPING
    if epoch != meta.producer_epoch:
        return Errors.PRODUCER_FENCED
    return Errors.NONE


class TransactionCoordinator:
    """See the module docstring."""

    def __init__(self, host: CoordinatorHost, config: TransactionConfig, num_partitions: int):
        self.host = host
        self.config = config
        self.state = TransactionStateManager(num_partitions, host.append_state)
        self._locks: dict[str, asyncio.Lock] = {}
        # TxnOffsetCommit's offsets, until the commit: txn id → group → (t, p) → offset.
        self._pending: dict[str, dict[str, dict[TopicPartitionKey, tuple[int, int, str | None]]]]
        self._pending = {}
        self._task: asyncio.Task[None] | None = None
        self._retries: dict[str, asyncio.Task[None]] = {}
        self._synced = asyncio.Lock()

    def _lock(self, txn_id: str) -> asyncio.Lock:
        return self._locks.setdefault(txn_id, asyncio.Lock())

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the partitions led here, then run the background task."""
        await self.sync_partitions()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.run())

    async def run(self) -> None:
        interval = self.config.abort_timed_out_interval_ms / 1000
        expiry_interval = self.config.remove_expired_interval_ms / 1000
        loop = asyncio.get_running_loop()
        next_scan = loop.time() + interval
        next_expiry = loop.time() + expiry_interval
        while True:
            await asyncio.sleep(min(SYNC_INTERVAL_S, interval, expiry_interval))
            try:
                await self.sync_partitions()
                if loop.time() >= next_scan:
                    next_scan = loop.time() + interval
                    await self.abort_timed_out()
                    await self.retry_prepared()
                if loop.time() >= next_expiry:
                    next_expiry = loop.time() + expiry_interval
                    await self.remove_expired()
            except Exception:  # the next round retries; never let the task die
                log.exception("transaction coordinator background round failed")

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        for task in self._retries.values():
            task.cancel()
        self._retries.clear()

    async def sync_partitions(self) -> None:
        """Load the state partitions this broker newly leads, or leads at a new leader epoch
        (finishing their Prepare* transactions); forget those it no longer leads."""
        async with self._synced:
            led = self.host.led_state_partitions()
            for partition, epoch in sorted(self.state.loaded.items()):
                if partition not in led or led[partition][1] != epoch:
                    self.state.unload_partition(partition)
            for partition in sorted(set(led) - set(self.state.loaded)):
                partition_log, epoch = led[partition]
                loaded = self.state.load_partition(partition, partition_log, epoch)
                if loaded:
                    log.info(
                        "%d transactional ids in partition %d (coordinator epoch %d)",
                        len(loaded), partition, epoch,
                    )  # fmt: skip
                for meta in loaded:
                    async with self._lock(meta.transactional_id):
                        await self._recover(meta.transactional_id)

    async def _coordinates(self, txn_id: str) -> bool:
        """Whether this broker is the id's coordinator, loading newly led partitions first
        (a client that found this broker through FindCoordinator may be ahead of the
        background task)."""
        if not self.state.coordinates(txn_id):
            await self.sync_partitions()
        return self.state.coordinates(txn_id)

    async def _recover(self, txn_id: str) -> None:
        meta = self.state.get(txn_id)
        if meta is None:
            return
        try:
            if meta.is_prepared:
                log.info("transactional id %r: completing its %s", txn_id, meta.state.value)
                await self._complete(meta)
            elif meta.state is _S.ONGOING and meta.groups:
                await self._end(meta, commit=False, fence=True)
        except TransactionStateWriteError as exc:
            log.warning("transactional id %r: recovery postponed: %s", txn_id, exc)

    # -- requests ----------------------------------------------------------------------------

    async def init_producer_id(
        self, txn_id: str, timeout_ms: int, producer_id: int = -1, producer_epoch: int = -1
    ) -> tuple[Errors, int, int]:
        if not txn_id:
            return Errors.INVALID_REQUEST, -1, -1
        if not await self._coordinates(txn_id):
            return Errors.NOT_COORDINATOR, -1, -1
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return Errors.INVALID_TRANSACTION_TIMEOUT, -1, -1
        async with self._lock(txn_id):
            meta = self.state.get(txn_id)
            now = now_ms()
            try:
                if meta is None:
                    pid = await self.host.next_producer_id()
                    meta = TransactionMetadata(txn_id, pid, 0, timeout_ms, last_update_ms=now)
                    await self.state.write(meta)
                    return Errors.NONE, pid, 0
                if producer_id >= 0 and (
                    producer_id != meta.producer_id or producer_epoch != meta.producer_epoch
                ):
                    return Errors.PRODUCER_FENCED, -1, -1
                if meta.is_prepared:
                    await self._complete(meta)
                    meta = self._current(txn_id)
                if meta.state is _S.ONGOING:
                    await self._end(meta, commit=False, fence=True)
                    meta = self._current(txn_id)
                if meta.is_prepared:  # markers still on their way: the client retries
                    return Errors.CONCURRENT_TRANSACTIONS, -1, -1
                pid, epoch = meta.producer_id, meta.producer_epoch + 1
                if epoch > MAX_EPOCH:
                    pid, epoch = await self.host.next_producer_id(), 0
                staged = meta.staged(
                    _S.EMPTY, now, producer_id=pid, producer_epoch=epoch, timeout_ms=timeout_ms,
                    partitions=frozenset(), groups=frozenset(), pending_offsets={},
                )  # fmt: skip
                await self.state.write(staged)
            except TransactionStateWriteError as exc:
                return _state_write_failed(f"InitProducerId of {txn_id!r}", exc), -1, -1
            self._pending.pop(txn_id, None)
            return Errors.NONE, pid, epoch

    def _current(self, txn_id: str) -> TransactionMetadata:
        meta = self.state.get(txn_id)
        assert meta is not None, txn_id  # written under the id's lock a moment ago
        return meta

    async def add_partitions(
        self, txn_id: str, pid: int, epoch: int, partitions: Sequence[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, Errors]:
        def all_(code: Errors) -> dict[TopicPartitionKey, Errors]:
            return dict.fromkeys(partitions, code)

        if not await self._coordinates(txn_id):
            return all_(Errors.NOT_COORDINATOR)
        async with self._lock(txn_id):
            meta = self.state.get(txn_id)
            error = self._check_open(meta, pid, epoch)
            if error != Errors.NONE:
                return all_(error)
            assert meta is not None
            unknown = [tp for tp in partitions if not self.host.partition_exists(*tp)]
            if unknown:
                result = all_(Errors.OPERATION_NOT_ATTEMPTED)
                result.update(dict.fromkeys(unknown, Errors.UNKNOWN_TOPIC_OR_PARTITION))
                return result
            added = frozenset(partitions) - meta.partitions
            if added or meta.state is not _S.ONGOING:
                error = await self._begin(meta, partitions=meta.partitions | added)
            return all_(error)

    async def add_offsets(self, txn_id: str, pid: int, epoch: int, group: str) -> Errors:
        if not await self._coordinates(txn_id):
            return Errors.NOT_COORDINATOR
        async with self._lock(txn_id):
            meta = self.state.get(txn_id)
            error = self._check_open(meta, pid, epoch)
            if error != Errors.NONE:
                return error
            assert meta is not None
            offsets_partition = self.host.group_partition(group)
            if group in meta.groups and meta.state is _S.ONGOING:
                return Errors.NONE
            return await self._begin(
                meta, groups=meta.groups | {group}, partitions=meta.partitions | {offsets_partition}
            )

    def _check_open(self, meta: TransactionMetadata | None, pid: int, epoch: int) -> Errors:
        error = _check_producer(meta, pid, epoch)
        if error == Errors.NONE and meta is not None and meta.is_prepared:
            return Errors.CONCURRENT_TRANSACTIONS
        return error

    async def _begin(self, meta: TransactionMetadata, **changes: object) -> Errors:
        now = now_ms()
        start = meta.txn_start_ms if meta.state is _S.ONGOING else now
        try:
            await self.state.write(meta.staged(_S.ONGOING, now, txn_start_ms=start, **changes))
        except TransactionStateWriteError as exc:
            return _state_write_failed(f"transactional id {meta.transactional_id!r}", exc)
        return Errors.NONE

    def txn_offset_commit(
        self, txn_id: str, group: str, pid: int, epoch: int,
        offsets: Sequence[tuple[str, int, int, int, str | None]],
    ) -> Errors:  # fmt: skip
        """Hold ``offsets`` (topic, partition, offset, leader epoch, metadata) until the
        transaction ends, as the transaction's coordinator (which is also the group's; see
        the module docstring). The transaction must be Ongoing with ``group`` added.
        NOT_COORDINATOR if this broker does not coordinate the id (the group coordinator's
        transactional batch in ``__consumer_offsets`` is then the only copy)."""
        if not self.state.coordinates(txn_id):
            return Errors.NOT_COORDINATOR
        meta = self.state.get(txn_id)
        error = self._check_open(meta, pid, epoch)
        if error != Errors.NONE:
            return error
        assert meta is not None
        if meta.state is not _S.ONGOING or group not in meta.groups:
            return Errors.INVALID_TXN_STATE
        held = self._pending.setdefault(txn_id, {}).setdefault(group, {})
        for topic, partition, offset, leader_epoch, metadata in offsets:
            held[(topic, partition)] = (offset, leader_epoch, metadata)
        return Errors.NONE

    async def end_txn(self, txn_id: str, pid: int, epoch: int, commit: bool) -> Errors:
        if not await self._coordinates(txn_id):
            return Errors.NOT_COORDINATOR
        async with self._lock(txn_id):
            meta = self.state.get(txn_id)
            error = _check_producer(meta, pid, epoch)
            if error != Errors.NONE:
                return error
            assert meta is not None
            if meta.state in (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT):
                done_commit = meta.state is _S.COMPLETE_COMMIT
                return Errors.NONE if done_commit == commit else Errors.INVALID_TXN_STATE
            if meta.is_prepared:
                return Errors.CONCURRENT_TRANSACTIONS
            if meta.state is not _S.ONGOING:
                return Errors.INVALID_TXN_STATE
            try:
                await self._end(meta, commit=commit, fence=False)
            except TransactionStateWriteError as exc:
                return _state_write_failed(f"EndTxn of {txn_id!r}", exc)
            return Errors.NONE

    # -- ending transactions -----------------------------------------------------------------

    async def _end(self, meta: TransactionMetadata, *, commit: bool, fence: bool) -> None:
        """Prepare*, then complete. ``fence``: abort with the epoch bumped (timeout, re-init,
        recovery), so the producer's old epoch is refused everywhere."""
        pending = self._pending.get(meta.transactional_id, {}) if commit else {}
        state = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
        epoch = meta.producer_epoch + 1 if fence else meta.producer_epoch
        prepared = meta.staged(state, now_ms(), producer_epoch=epoch, pending_offsets=pending)
        await self.state.write(prepared)  # the offsets are in the log now, or still held
        self._pending.pop(meta.transactional_id, None)
        await self._complete(prepared)

    async def _complete(self, meta: TransactionMetadata) -> None:
        """From Prepare*: markers, offsets, Complete*. A partition whose marker failed keeps
        the transaction prepared; the background task retries it."""
        commit = meta.state is _S.PREPARE_COMMIT
        marker = TxnMarker(
            meta.producer_id, meta.producer_epoch, commit,
            self.state.coordinator_epoch(meta.transactional_id),
        )  # fmt: skip
        results = await self.host.write_markers(marker, sorted(meta.partitions))
        failed = {
            tp: code.name
            for tp, code in results.items()
            if code not in (Errors.NONE, Errors.UNKNOWN_TOPIC_OR_PARTITION)
        }
        if failed:
            log.warning(
                "transactional id %r: markers not written yet: %s", meta.transactional_id, failed
            )
            self._retry_later(meta.transactional_id)
            return
        if commit:
            for group, offsets in sorted(meta.pending_offsets.items()):
                try:
                    await self.host.commit_offsets(
                        group, [(t, p, o, e, m) for (t, p), (o, e, m) in sorted(offsets.items())]
                    )
                except TransactionStateWriteError:
                    self._retry_later(meta.transactional_id)
                    raise
        done = _S.COMPLETE_COMMIT if commit else _S.COMPLETE_ABORT
        await self.state.write(
            meta.staged(done, now_ms(), partitions=frozenset(), groups=frozenset(),
                        pending_offsets={})
        )  # fmt: skip

    async def abort_timed_out(self, now: int | None = None) -> list[str]:
        """Abort (fencing the producer) every transaction open beyond its timeout; returns
        their ids (Kafka's ``abortTimedOutTransactions``)."""
        now = now_ms() if now is None else now
        aborted = []
        for meta in self.state.all():
            if meta.state is not _S.ONGOING or now <= meta.txn_start_ms + meta.timeout_ms:
                continue
            async with self._lock(meta.transactional_id):
                current = self.state.get(meta.transactional_id)
                if current is None or current.state is not _S.ONGOING:
                    continue
                log.info(
                    "aborting transaction of %r (producer %d epoch %d): open %d ms, timeout %d ms",
                    current.transactional_id, current.producer_id, current.producer_epoch,
                    now - current.txn_start_ms, current.timeout_ms,
                )  # fmt: skip
                with contextlib.suppress(TransactionStateWriteError):
                    await self._end(current, commit=False, fence=True)
                    aborted.append(current.transactional_id)
        return aborted

    async def remove_expired(self, now: int | None = None) -> list[str]:
        """Remove the idle transactional ids (see the module docstring); returns them."""
        now = now_ms() if now is None else now
        horizon = now - self.config.id_expiration_ms
        removed = []
        for meta in self.state.all():
            if meta.state not in _EXPIRABLE or meta.last_update_ms > horizon:
                continue
            txn_id = meta.transactional_id
            async with self._lock(txn_id):
                current = self.state.get(txn_id)  # a request may have come meanwhile
                if current is None or current.state not in _EXPIRABLE:
                    continue
                if current.last_update_ms > horizon or not self.state.coordinates(txn_id):
                    continue
                try:
                    await self.state.remove(txn_id)
                except TransactionStateWriteError as exc:
                    log.warning("transactional id %r: expiry postponed: %s", txn_id, exc)
                    continue
                log.info(
                    "transactional id %r (producer %d) expired: idle %d ms",
                    txn_id, current.producer_id, now - current.last_update_ms,
                )  # fmt: skip
                self._pending.pop(txn_id, None)
                removed.append(txn_id)
        # The ids' locks stay: a request may be waiting on one (a new lock for the same id
        # would let two requests in at once).
        return removed

    def _retry_later(self, txn_id: str) -> None:
        """Resend the markers of a prepared transaction with backoff until it completes or
        this broker stops coordinating it (one task per id)."""
        task = self._retries.get(txn_id)
        if task is not None and not task.done():
            return

        async def retry() -> None:
            backoff, most = RETRY_BACKOFF_S
            while True:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, most)
                async with self._lock(txn_id):
                    meta = self.state.get(txn_id)
                    if meta is None or not meta.is_prepared:
                        return
                    try:
                        # Failing again schedules nothing: this task is still running.
                        await self._complete(meta)
                    except TransactionStateWriteError as exc:
                        log.warning("transactional id %r: completion postponed: %s", txn_id, exc)
                    except Exception:  # the next round retries
                        log.exception("transactional id %r: marker retry failed", txn_id)

        self._retries[txn_id] = asyncio.get_running_loop().create_task(retry())

    async def retry_prepared(self) -> None:
        """Finish the transactions whose markers could not all be written."""
        for meta in self.state.all():
            if meta.is_prepared:
                async with self._lock(meta.transactional_id):
                    await self._recover(meta.transactional_id)
