"""``CleanedTransactions``: what the log cleaner knows of transactions while it walks a log
(Kafka's ``CleanedTransactionMetadata``).

The cleaner reads the batches of the segments it cleans in offset order and asks this, for
each batch, whether it may be discarded:

* a **data batch** of an aborted transaction — known from the aborted-transaction index
  entries (:class:`~sluice.broker.log.transaction_index.AbortedTxn`) added before the
  segments are read (:meth:`add_aborted`): once the walk passes an entry's FirstOffset, the
  producer's transactional batches up to its ABORT marker are aborted — may be discarded
  (True). A transactional batch of a producer with no aborted transaction under way belongs
  to a committed one (False), and the producer is noted: its COMMIT marker must stay this
  pass. A non-transactional batch: False.
* a **control batch** (a marker; :meth:`on_marker`): an ABORT marker may go if no batch of
  its transaction was seen in this walk (all of its data was removed by an earlier pass);
  otherwise it stays, and its index entry goes into the cleaned segment's ``.txnindex`` (the
  ``cleaned_index`` list), so that ``read_committed`` fetches still learn of the aborted
  batches that remain. A COMMIT marker may go if no batch of its transaction was seen. An
  empty control batch (emptied by an earlier pass) may always go.

"May go" is not "goes": the cleaner keeps such a marker until its batch's delete horizon
(KIP-534: stamped by the first pass that finds it discardable, ``delete.retention.ms`` later)
has passed — a consumer that read the transaction's data before it was cleaned still gets its
marker — and keeps a producer's last batch (empty) whatever it is (see ``cleaner``).

The walk must start at the log start (the cleaner rewrites every segment from there) so that
no transaction's data precedes what was seen. One instance serves one pass (or one offset-map
build); entries added twice (a transaction spanning two segments) count once.

Thread safety: none; one cleaner thread owns an instance.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from sluice.broker.log.control_batch import ABORT, EndTxnMarker
from sluice.broker.log.record_batch import BatchHeader
from sluice.broker.log.transaction_index import AbortedTxn


class CleanedTransactions:
    """See the module docstring."""

    def __init__(self, aborted: Iterable[AbortedTxn] = ()) -> None:
        self._queue: list[tuple[int, int, AbortedTxn]] = []  # (first offset, last, entry)
        self._queued: set[AbortedTxn] = set()
        # Producer id → [its aborted entry under way, whether a batch of it was seen].
        self._ongoing_aborted: dict[int, tuple[AbortedTxn, bool]] = {}
        self._ongoing_committed: set[int] = set()
        #: Index entries of the ABORT markers kept, in marker order (the cleaned segment's
        #: ``.txnindex``); the cleaner takes them per group.
        self.cleaned_index: list[AbortedTxn] = []
        self.add_aborted(aborted)

    def add_aborted(self, aborted: Iterable[AbortedTxn]) -> None:
        for txn in aborted:
            if txn not in self._queued:
                self._queued.add(txn)
                heapq.heappush(self._queue, (txn.first_offset, txn.last_offset, txn))

    def _consume_up_to(self, offset: int) -> None:
        while self._queue and self._queue[0][0] <= offset:
            _, _, txn = heapq.heappop(self._queue)
            self._ongoing_aborted.setdefault(txn.producer_id, (txn, False))

    def on_batch(self, header: BatchHeader) -> bool:
        """A data batch was read: whether it belongs to an aborted transaction."""
        self._consume_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        ongoing = self._ongoing_aborted.get(header.producer_id)
        if ongoing is not None:
            self._ongoing_aborted[header.producer_id] = (ongoing[0], True)
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_marker(self, header: BatchHeader, marker: EndTxnMarker | None) -> bool:
        """A control batch was read (``marker`` None: an empty one): whether it may be
        discarded. A kept ABORT marker's entry is added to :attr:`cleaned_index`."""
        self._consume_up_to(header.last_offset)
        if marker is None:
            return True
        pid = header.producer_id
        if marker.kind == ABORT:
            ongoing = self._ongoing_aborted.pop(pid, None)
            if ongoing is not None and ongoing[1]:
                self.cleaned_index.append(ongoing[0])
                return False
            return True
        if pid in self._ongoing_committed:  # a COMMIT marker whose data was seen stays
            self._ongoing_committed.discard(pid)
            return False
        return True
