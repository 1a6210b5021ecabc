"""``TransactionStateManager``: the metadata of the transactional ids whose
``__transaction_state`` partitions this broker leads (Kafka's ``TransactionStateManager``).

Each change is one record appended durably (acks=-1, through the replica manager: at once on
a standalone broker) by the ``append`` callable the broker gives; only then does the change
replace the in-memory metadata (:meth:`put`). When this broker becomes a partition's leader
it replays the partition (:meth:`load_partition`), the last record per id winning (a
tombstone, written when an idle id expires, :meth:`remove`, ends it); when it stops leading
it, the partition's ids are forgotten (:meth:`unload_partition`).

The **coordinator epoch** of an id is the leader epoch of its partition at the time this
broker loaded it (Kafka's ``coordinatorEpoch``): every leadership change bumps it, so the
markers of a later coordinator carry a higher one than those of an earlier (a zombie).

Thread safety: used on the broker's event loop only.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator

from sluice.broker.log.log import Log
from sluice.broker.log.record_batch import iter_batches
from sluice.broker.log.records import decode_batch, encode_batch
from sluice.broker.transactions import transaction_log as txn_log
from sluice.broker.transactions.transaction_metadata import TransactionMetadata

log = logging.getLogger(__name__)

#: Appends one batch durably to a partition of ``__transaction_state``; raises
#: :class:`TransactionStateWriteError` if it was not made durable.
Appender = Callable[[int, bytes], Awaitable[None]]


class TransactionStateWriteError(Exception):
    """A state change was not made durable (leadership moved, the ISR is too small)."""


class TransactionStateManager:
    """See the module docstring."""

    def __init__(self, num_partitions: int, append: Appender) -> None:
        self.num_partitions = num_partitions
        self._append = append
        #: partition → the coordinator epoch it was loaded at
        self.loaded: dict[int, int] = {}
        self._txns: dict[str, TransactionMetadata] = {}

    def partition_for(self, transactional_id: str) -> int:
        return txn_log.partition_for(transactional_id, self.num_partitions)

    def coordinates(self, transactional_id: str) -> bool:
        """Whether this broker is the id's coordinator (it leads and has loaded its
        partition)."""
        return self.partition_for(transactional_id) in self.loaded

    def coordinator_epoch(self, transactional_id: str) -> int:
        """The leader epoch of the id's partition as loaded here (-1: not loaded)."""
        return self.loaded.get(self.partition_for(transactional_id), -1)

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        return self._txns.get(transactional_id)

    def all(self) -> list[TransactionMetadata]:
        return list(self._txns.values())

    async def write(self, meta: TransactionMetadata) -> None:
        """Append ``meta`` as its id's latest record, then make it current."""
        batch = encode_batch(
            [(txn_log.encode_key(meta.transactional_id), txn_log.encode_value(meta))],
            timestamps=[max(meta.last_update_ms, 0)],
        )
        await self._append(self.partition_for(meta.transactional_id), batch)
        self._txns[meta.transactional_id] = meta

    async def remove(self, transactional_id: str) -> None:
        """Append the id's tombstone (the compacted topic then forgets it), then forget it
        here (Kafka's ``removeExpiredTransactionalIds``)."""
        batch = encode_batch([(txn_log.encode_key(transactional_id), None)])
        await self._append(self.partition_for(transactional_id), batch)
        self._txns.pop(transactional_id, None)

    @staticmethod
    def _records(partition_log: Log) -> Iterator[tuple[bytes | None, bytes | None]]:
        offset = partition_log.log_start_offset
        while offset < partition_log.log_end_offset:
            result = partition_log.read(offset, 1 << 20, upper_bound="log_end")
            if result.slice is None:
                break
            raw = result.slice.read()
            for header in iter_batches(raw):
                if not header.is_control:
                    for record in decode_batch(raw, header.position):
                        if record.offset >= offset:
                            yield record.key, record.value
                offset = header.next_offset

    def load_partition(
        self, partition: int, partition_log: Log, coordinator_epoch: int = 0
    ) -> list[TransactionMetadata]:
        """Replay one partition, led here at ``coordinator_epoch``; returns its ids'
        metadata. A record that does not decode is logged and skipped (the next one for the id
        supersedes it)."""
        found: dict[str, TransactionMetadata | None] = {}
        for key, value in self._records(partition_log):
            try:
                txn_id, meta = txn_log.decode(key, value)
            except txn_log.CorruptTransactionLogError as exc:
                log.warning("%s-%d: skipping a record: %s", txn_log.TOPIC, partition, exc)
                continue
            found[txn_id] = meta
        self.loaded[partition] = coordinator_epoch
        loaded = [m for m in found.values() if m is not None]
        for meta in loaded:
            self._txns[meta.transactional_id] = meta
        return loaded

    def unload_partition(self, partition: int) -> None:
        self.loaded.pop(partition, None)
        for txn_id in [t for t in self._txns if self.partition_for(t) == partition]:
            del self._txns[txn_id]
