"""``TargetTransactions``: the exactly-once loop's transactional target producer, its errors
sorted into what the loop does next.

librdkafka's transactional API raises ``KafkaException`` whose ``KafkaError`` says which of
three kinds a failure is; this module turns them into the loop's decisions:

* **retriable** (``error.retriable()``: a coordinator moving, a timeout): the same call again,
  until ``commit.timeout.ms`` — then :class:`~sluice.pipeline.mirror.errors.CommitError`;
* **abortable** (``error.txn_requires_abort()``: a record failed, the coordinator aborted a
  transaction that outlived ``transaction.timeout.ms``): :meth:`commit` aborts the transaction
  and answers False — the loop rewinds and mirrors the batch again;
* **fatal** (``error.fatal()``: PRODUCER_FENCED — a newer mirror with the same
  ``transactional.id`` started — or another unrecoverable state): the producer is unusable;
  :class:`~sluice.pipeline.mirror.errors.MirrorFencedError` (fenced) or
  :class:`~sluice.pipeline.mirror.errors.MirrorError` (anything else fatal). The loop stops.

Protocol and rationale: ``sluice.pipeline.mirror.offset_store``. Used from the loop's thread
only, like the producer it wraps.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaException

from sluice.pipeline.mirror.errors import (
    CommitError,
    MirrorError,
    MirrorFencedError,
    error_of,
    kafka_codes,
)

__all__ = ["TargetTransactions"]

log = logging.getLogger("sluice.mirror")

# A newer producer with the same transactional.id took over (or the coordinator bumped the
# epoch after a timeout): this one can never commit again.
_FENCED = kafka_codes("_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")


class TargetTransactions:
    """The transactions of ``producer`` (built with a ``transactional.id``) for the loop of
    source ``alias``; ``timeout_ms`` bounds the retries of each call (``commit.timeout.ms``)."""

    def __init__(self, producer: Any, alias: str, transactional_id: str, timeout_ms: int) -> None:
        self.producer = producer
        self.alias = alias
        self.transactional_id = transactional_id
        self.timeout_s = timeout_ms / 1000

    def init(self) -> None:
        """``init_transactions()``: register the id and fence every older producer of it (its
        open transaction aborted, a prepared commit completed)."""
        self._call("initialize the transactions", self.producer.init_transactions)

    def begin(self) -> None:
        self._call("begin a transaction", lambda _timeout: self.producer.begin_transaction())

    def commit(self) -> bool:
        """Commit the open transaction (flushing what is still queued): True when committed;
        False when it had to be aborted (aborted here; mirror the batch again)."""
        try:
            self._call("commit the transaction", self.producer.commit_transaction)
            return True
        except _AbortNeeded as exc:
            log.warning(
                "%s: transaction aborted (%s); the batch is mirrored again", self.alias, exc
            )
            self.abort()
            return False

    def abort(self) -> None:
        """Abort the open transaction: nothing of it becomes visible to read_committed
        readers. Raises :class:`MirrorFencedError` when the producer was fenced meanwhile."""
        try:
            self._call("abort the transaction", self.producer.abort_transaction)
        except _AbortNeeded as exc:  # not expected of an abort: treat as fatal
            raise MirrorError(f"{self.alias}: expected the abort to succeed, found {exc}") from None

    def _call(self, what: str, call: Callable[[float], Any]) -> None:
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                call(max(1.0, deadline - time.monotonic()))
                return
            except KafkaException as exc:
                error = error_of(exc)
                if error is None:
                    raise MirrorError(f"{self.alias}: cannot {what}: {exc}") from None
                if error.fatal() or error.code() in _FENCED:
                    raise self._fatal(what, error) from None
                if error.txn_requires_abort():
                    raise _AbortNeeded(str(error)) from None
                if not error.retriable():
                    raise CommitError(f"{self.alias}: expected to {what}, found {error}") from None
                if time.monotonic() > deadline:
                    raise CommitError(
                        f"{self.alias}: expected to {what} within commit.timeout.ms="
                        f"{int(self.timeout_s * 1000)}, found {error} until then"
                    ) from None
                log.info("%s: cannot %s yet (%s), retrying", self.alias, what, error.name())
                time.sleep(0.1)

    def _fatal(self, what: str, error: Any) -> MirrorError:
        if error.code() in _FENCED or "fenced" in str(error).lower():
            return MirrorFencedError(
                f"{self.alias}: expected to {what} as transactional.id "
                f"{self.transactional_id}, found this mirror fenced ({error}): a newer mirror "
                "with the same group.id and source cluster runs; nothing uncommitted of this "
                "one becomes visible"
            )
        return MirrorError(f"{self.alias}: cannot {what}: fatal producer error {error}")


class _AbortNeeded(Exception):
    """Internal: the transaction must be aborted (``txn_requires_abort``)."""
