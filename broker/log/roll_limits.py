"""``RollLimits``: when the active segment must roll, reduced to numbers compared per append.

A ``Log`` rolls its active segment before an append that would make it break any of:

* ``segment.bytes`` — the segment's size plus the appended bytes over ``max_bytes``;
* ``segment.ms`` — the broker's clock past ``deadline_ms``, the segment's creation time plus
  ``LogConfig.max_segment_ms`` (``segment.ms``, or less on a compacted log so
  ``max.compaction.lag.ms`` is honoured);
* the 4-byte relative offsets of its indexes — a last offset over ``max_offset``, the base
  offset plus 2^31-1;
* a full ``.index`` or ``.timeindex`` — read live from the indexes' ``is_full`` flags, which
  change only when an entry is added or removed.

Why a structure: the three limits depend only on the active segment and the log's config, so
they are computed once when either changes (``Log`` rebuilds them when ``segment`` or
``config`` is no longer the one they were made for; ``LogConfig`` is frozen, so a new config
is a new object) instead of from two properties and a method call on every append.

Thread safety: immutable; ``Log`` replaces it under its lock.
"""

from __future__ import annotations

from typing import NamedTuple

from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.log_segment import MAX_RELATIVE_OFFSET, LogSegment


class RollLimits(NamedTuple):
    """The limits of ``segment`` under ``config``. See the module docstring."""

    segment: LogSegment | None  # the active segment they were made for
    config: LogConfig | None  # the config they were made from
    max_bytes: int  # segment.bytes
    deadline_ms: int  # the segment rolls once the clock is past this
    max_offset: int  # the largest offset the segment can hold

    @classmethod
    def of(cls, segment: LogSegment, config: LogConfig) -> RollLimits:
        return cls(
            segment,
            config,
            config.segment_bytes,
            segment.created_ms + config.max_segment_ms,
            segment.base_offset + MAX_RELATIVE_OFFSET,
        )


#: Made for no segment: the first append after a log opens replaces it.
NO_ROLL_LIMITS = RollLimits(None, None, 0, 0, 0)
