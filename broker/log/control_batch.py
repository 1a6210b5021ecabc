"""Control batches: the transaction markers a coordinator writes to end a transaction in a
partition (Kafka's ``EndTransactionMarker`` and ``ControlRecordType``).

A marker is a batch with the transactional and control attributes set, the transaction's
producer id and epoch, BaseSequence -1, and one record (uncompressed)::

    key   = Version int16 (0), Type int16 (0 ABORT, 1 COMMIT)
    value = Version int16 (0), CoordinatorEpoch int32

Clients never write control batches (``Log.append`` refuses them from producers); consumers
skip them, and a ``read_committed`` consumer uses an ABORT marker to stop skipping the
aborted transaction's batches.

The log cleaner may leave a marker's batch **empty** (RecordCount 0): its transaction's data
is gone and the marker is kept only for its producer's epoch (see ``cleaned_transactions``).
:func:`read_marker` returns None for it, and the producer state ignores it, as Kafka's
``ProducerAppendInfo.append`` does. Pure functions; thread-safe.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from sluice.broker.log.errors import CorruptRecordError
from sluice.broker.log.record_batch import BatchHeader
from sluice.broker.log.records import decode_batch, encode_batch

ABORT = 0
COMMIT = 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


def encode_marker(
    producer_id: int, producer_epoch: int, *, commit: bool, coordinator_epoch: int, timestamp: int
) -> bytes:
    """One control batch ending ``producer_id``'s transaction (offset assigned on append)."""
    return encode_batch(
        [(_KEY.pack(0, COMMIT if commit else ABORT), _VALUE.pack(0, coordinator_epoch))],
        timestamps=[timestamp],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
    )


class EndTxnMarker(NamedTuple):
    """What a control batch says (Kafka's ``EndTransactionMarker``)."""

    kind: int  # ABORT or COMMIT
    coordinator_epoch: int


def read_marker(buf: bytes | bytearray | memoryview, header: BatchHeader) -> EndTxnMarker | None:
    """The marker of the control batch ``header`` of ``buf`` (whose position is relative to
    ``buf``); None for an empty one (cleaned). Raises :class:`CorruptRecordError` for a
    record that is not a marker."""
    if header.record_count == 0:
        return None
    records = decode_batch(buf, header.position)
    key = records[0].key if records else None
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError(
            f"control batch at offset {header.base_offset}: expected a 4-byte key, found {key!r}"
        )
    _, kind = _KEY.unpack_from(key)
    if kind not in (ABORT, COMMIT):
        raise CorruptRecordError(
            f"control batch at offset {header.base_offset}: expected type 0 (abort) or "
            f"1 (commit), found {kind}"
        )
    value = records[0].value
    if value is None or len(value) < _VALUE.size:
        raise CorruptRecordError(
            f"control batch at offset {header.base_offset}: expected a 6-byte value, "
            f"found {value!r}"
        )
    _, coordinator_epoch = _VALUE.unpack_from(value)
    return EndTxnMarker(int(kind), int(coordinator_epoch))
