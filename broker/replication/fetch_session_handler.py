"""``FetchSessionHandler``: a follower's side of a fetch session with one leader (KIP-227,
Kafka's ``FetchSessionHandler``).

The leader keeps, per session, each partition's fetch offset, log start and leader epoch as
last sent (``sluice.broker.server.fetch_session``). This handler keeps the same: ``sent``. A
request is built from the partitions the fetcher wants now:

* no session (``session_id`` 0): a full request naming every partition, epoch 0 — it asks
  the leader to open a session; an answer with session id 0 (no slot) leaves it full;
* in a session: epoch ``epoch``, naming only the partitions whose wanted state differs from
  ``sent`` (new ones, or a fetch offset moved by an append), and in ``forgotten`` those sent
  but no longer wanted. The fetcher says which partitions may have changed since the last
  request, so building one costs what changed, not what is followed.

:meth:`handle_response` is called with the answer's top-level error and session id: success
moves to the next epoch; FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH or any other
top-level error — and :meth:`reset` after a connection error, when whether the leader saw
the request is unknown — start over with a full request. An incremental answer carries only
the partitions that changed; a partition it leaves out has nothing new.

Not thread-safe: one per ``ReplicaFetcher``, on the broker's event loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sluice.common.topic_partition import TopicPartition

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
_MAX_EPOCH = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class PartitionRequest:
    """What is asked for one partition."""

    fetch_offset: int
    log_start_offset: int
    current_leader_epoch: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class SessionRequest:
    """The session metadata and partitions of the next request."""

    session_id: int
    epoch: int
    partitions: dict[TopicPartition, PartitionRequest]
    forgotten: list[TopicPartition]

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.sent: dict[TopicPartition, PartitionRequest] = {}
        # The last built request's partitions and forgotten ones, until it is answered.
        self._pending: SessionRequest | None = None

    def build(
        self, wanted: Mapping[TopicPartition, PartitionRequest], changed: Iterable[TopicPartition]
    ) -> SessionRequest:
        """The next request for ``wanted`` (every partition the fetcher fetches now), where
        only the partitions in ``changed`` may differ from what was last built: a full request
        names all of ``wanted``, an incremental one only those of ``changed`` that differ from
        ``sent`` (and forgets those of ``changed`` no longer wanted). Costs ``len(changed)``
        in a session, so a fetcher following thousands of partitions need not walk them."""
        if self.session_id == INVALID_SESSION_ID:
            request = SessionRequest(INVALID_SESSION_ID, INITIAL_EPOCH, dict(wanted), [])
        else:
            partitions: dict[TopicPartition, PartitionRequest] = {}
            forgotten = []
            for tp in changed:
                r = wanted.get(tp)
                if r is None:
                    if tp in self.sent:
                        forgotten.append(tp)
                elif self.sent.get(tp) != r:
                    partitions[tp] = r
            request = SessionRequest(self.session_id, self.epoch, partitions, forgotten)
        self._pending = request
        return request

    def handle_response(self, error: int, session_id: int) -> bool:
        """Record the answer to the last built request; True if it succeeded (its partitions
        may be used), False if the session starts over (the next request is full)."""
        pending, self._pending = self._pending, None
        if error != 0 or pending is None:
            self.reset()
            return False
        if self.session_id == INVALID_SESSION_ID:
            # The answer to a full request: a new session, or none (no slot at the leader).
            self.session_id = session_id
            self.epoch = INITIAL_EPOCH if session_id == INVALID_SESSION_ID else 1
            self.sent = dict(pending.partitions) if session_id != INVALID_SESSION_ID else {}
            return True
        if session_id != self.session_id:
            self.reset()  # the leader closed it (e.g. the session emptied): start over
            return True
        self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1
        self.sent.update(pending.partitions)
        for tp in pending.forgotten:
            self.sent.pop(tp, None)
        return True

    def reset(self) -> None:
        """Start over with a full request (a connection error, or a refused session)."""
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.sent = {}
        self._pending = None
