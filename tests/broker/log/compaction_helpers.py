"""Builders and readers shared by the compaction tests."""

from __future__ import annotations

from pathlib import Path

from sluice.broker.log.cleaner import Cleaner, CleanerStats
from sluice.broker.log.cleaner_manager import LogToClean
from sluice.broker.log.log import Log
from sluice.broker.log.record_batch import BatchHeader, iter_batches
from sluice.broker.log.records import Record, decode_batch
from sluice.common.topic_partition import TopicPartition

TP = TopicPartition("t", 0)


class Clock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def read_all(log: Log) -> tuple[list[BatchHeader], list[Record]]:
    """Every batch header and record from the log start to the high watermark."""
    headers: list[BatchHeader] = []
    records: list[Record] = []
    offset = log.log_start_offset
    while offset < log.high_watermark:
        result = log.read(offset, 1 << 22)
        if result.slice is None:
            break
        raw = result.slice.read()
        for h in iter_batches(raw):
            headers.append(h)
            records.extend(decode_batch(raw, h.position))
            offset = h.next_offset
    return headers, records


def clean(
    log: Log, now: int, *, max_keys: int = 1 << 20, checkpoint: int | None = None
) -> CleanerStats:
    """One cleaning pass over ``log`` whatever its dirty ratio."""
    cleanable = LogToClean.of(TP, log, checkpoint, now)
    return Cleaner(max_keys).clean(cleanable, now)


def segment_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())
