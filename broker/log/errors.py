"""One exception per storage failure mode.

Every message says what was expected and what was found. The broker maps these to Kafka
error codes (``CorruptRecordError`` → CORRUPT_MESSAGE, ``OffsetOutOfRangeError`` →
OFFSET_OUT_OF_RANGE, ...; a bad topic name is
:class:`sluice.common.topic_partition.InvalidTopicError`).
"""

from __future__ import annotations


class StorageError(Exception):
    """Base class of every error raised by ``sluice.broker.log``."""


class CorruptRecordError(StorageError):
    """A record batch failed validation: bad length, magic, CRC, offsets or counts."""


class InvalidRecordError(StorageError):
    """A well-formed batch that the log refuses (e.g. a control batch from a client)."""


class RecordBatchTooLargeError(StorageError):
    """A batch is larger than ``max.message.bytes`` or than a whole segment may be."""


class OffsetOutOfRangeError(StorageError):
    """A read or lookup asked for an offset outside ``[log start, log end]``."""

    def __init__(self, message: str, *, offset: int, log_start: int, log_end: int) -> None:
        super().__init__(message)
        self.offset = offset
        self.log_start = log_start
        self.log_end = log_end


class NonMonotonicOffsetError(StorageError):
    """An append or index entry did not increase the offset (an invariant, not bad input)."""


class SegmentOffsetOverflowError(StorageError):
    """An offset cannot be stored relative to its segment's base in 4 bytes."""


class CorruptIndexError(StorageError):
    """An ``.index`` or ``.timeindex`` file failed its sanity check; it is rebuilt."""


class LogDirectoryError(StorageError):
    """A log directory is missing, unreadable or holds an unexpected entry."""


class OutOfOrderSequenceError(StorageError):
    """An idempotent producer's batch does not continue its sequence (a gap or a rewind)."""


class InvalidProducerEpochError(StorageError):
    """A batch carries an older epoch than the producer id's current one (a zombie)."""


class TransactionCoordinatorFencedError(StorageError):
    """A transaction marker from an older coordinator epoch than the last marker the
    partition wrote for that producer id (a coordinator that lost its partition)."""


class UnknownProducerIdError(StorageError):
    """A non-zero sequence from a producer id the log holds no state for."""


class LogDirFailureError(StorageError):
    """A filesystem call on a log dir failed (ENOSPC, EIO, ...): the write was undone and the
    dir is now offline (see ``log_dir_failure_channel``). The cause is the ``OSError``."""

    def __init__(self, message: str, *, log_dir: str) -> None:
        super().__init__(message)
        self.log_dir = log_dir


class LogDirOfflineError(StorageError):
    """A write to a partition whose log dir is offline after a storage failure: refused
    until the dir recovers (or, after an fsync failure, until the broker restarts)."""
