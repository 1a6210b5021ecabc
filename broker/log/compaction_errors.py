"""The exceptions of log compaction, apart from the storage errors in ``errors``.

``NullKeyOnCompactedTopicError`` is an :class:`~sluice.broker.log.errors.InvalidRecordError`,
so the server answers it with Kafka's INVALID_RECORD (87) through the existing mapping, as
Kafka's ``LogValidator`` does ("Compacted topic cannot accept message without key").
``CleaningAbortedError`` never reaches a client: the cleaner catches it, discards its
``.cleaned`` files and tries the log again later.
"""

from __future__ import annotations

from sluice.broker.log.errors import InvalidRecordError, StorageError


class NullKeyOnCompactedTopicError(InvalidRecordError):
    """A record without a key was appended to a log whose ``cleanup.policy`` has compact."""


class CleaningAbortedError(StorageError):
    """A cleaning pass stopped before its swap: the log was truncated, had segments deleted,
    or was being deleted or closed while the cleaner read it."""


class OffsetMapTooSmallError(StorageError):
    """The cleaner's key map cannot hold the keys of even one batch of the dirty section
    (``log.cleaner.dedupe.buffer.size`` too small for the log)."""
