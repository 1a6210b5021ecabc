"""What ``Log.append`` and ``Log.read`` return: :class:`AppendInfo` and :class:`ReadInfo`.

Plain values, built under the log's lock and immutable after; thread-safe to share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from sluice.broker.log.log_segment import FileSlice
from sluice.broker.log.producer_state import BatchMetadata
from sluice.broker.log.record_batch import BatchHeader


class AppendInfo(NamedTuple):
    """What an append did: the offsets it assigned and what the batches held.

    A NamedTuple, not a frozen dataclass: it is built once per produce request and a frozen
    dataclass's ``__init__`` costs several times more."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    record_count: int
    batch_count: int
    size: int
    log_append_time: int  # -1 unless message.timestamp.type is LogAppendTime
    log_start_offset: int
    batches: tuple[BatchHeader, ...]
    duplicate: bool = False  # an idempotent retry: acknowledged, not appended again


def duplicate_info(original: BatchMetadata, header: BatchHeader, log_start: int) -> AppendInfo:
    """The answer to an idempotent producer's retry of a batch the log holds as
    ``original``: its first offsets, nothing appended."""
    return AppendInfo(
        first_offset=original.first_offset,
        last_offset=original.last_offset,
        max_timestamp=header.max_timestamp,
        record_count=header.record_count,
        batch_count=1,
        size=0,
        log_append_time=-1,
        log_start_offset=log_start,
        batches=(),
        duplicate=True,
    )


@dataclass(frozen=True)
class ReadInfo:
    """A read: a slice of whole batches (or None) and the offsets as they stood."""

    slice: FileSlice | None
    high_watermark: int
    log_start_offset: int
    log_end_offset: int

    @property
    def size(self) -> int:
        return self.slice.size if self.slice else 0
