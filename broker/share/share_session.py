"""``ShareSession``: one member's share session (KIP-932's ShareFetch session).

ShareFetch's ``share_session_epoch``: 0 opens a session (replacing the member's old one, whose
acquired records are released), -1 closes it (the request may only acknowledge), and any other
value must be the session's epoch plus one; the session then holds the partitions the member
has fetched (added by naming them, removed by ``forgotten_topics_data``). ShareAcknowledge
carries the same epoch rules and moves the epoch too (its epoch also "increments for
consecutive requests", KIP-932).

Not thread-safe: used on the broker's event loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: ``share_session_epoch`` values with a meaning of their own.
OPEN_EPOCH = 0
FINAL_EPOCH = -1


class ShareSessionNotFoundError(Exception):
    """An epoch other than 0 for a member without a session (SHARE_SESSION_NOT_FOUND)."""


class ShareSessionLimitError(Exception):
    """No room for one more session (SHARE_SESSION_LIMIT_REACHED)."""


class InvalidShareSessionEpochError(Exception):
    """An epoch that is not the session's next (INVALID_SHARE_SESSION_EPOCH)."""


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 0
    #: when a request last used it (the broker's loop clock, ms)
    used_ms: float = 0.0
    #: (topic, partition)s the session fetches, in the order first named
    partitions: dict[tuple[str, int], None] = field(default_factory=dict)

    def advance(self, epoch: int) -> None:
        """Accept ``epoch`` as this session's next request and move to it, else raise."""
        if epoch == FINAL_EPOCH:
            return
        if epoch != self.epoch + 1:
            raise InvalidShareSessionEpochError(
                f"share session epoch {epoch}, expected {self.epoch + 1}"
            )
        self.epoch = epoch
