"""Fixtures of the load's tests: a model of the split reader for the split writer's tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from sluice.pipeline.load import split_writer
from sluice.pipeline.source.ranges import OffsetRange
from sluice.pipeline.source.split_reader import ARROW_SCHEMA, SplitResult


def model_batch(split: OffsetRange, offsets: range, micros: list[int]) -> pa.RecordBatch:
    """The reader's batch of ``offsets`` of ``split`` (values ``v<offset>``, no key/headers)."""
    n = len(offsets)
    return pa.RecordBatch.from_arrays(
        [
            pa.nulls(n, pa.binary()),
            pa.array([f"v{o}".encode() for o in offsets], pa.binary()),
            pa.array([split.topic] * n, pa.string()),
            pa.array([split.partition] * n, pa.int32()),
            pa.array(list(offsets), pa.int64()),
            pa.array(micros, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            pa.array([0] * n, pa.int32()),
            pa.nulls(n, ARROW_SCHEMA.field("headers").type),
        ],
        schema=ARROW_SCHEMA,
    )


@pytest.fixture
def fake_reader(monkeypatch: pytest.MonkeyPatch) -> dict[OffsetRange, list[int]]:
    """``read_split`` (and the packed ``read_splits``, split by split) replaced: yields a
    split's offsets in batches of 7 with the timestamps registered for it (µs), and fills in
    the result as the reader does."""
    stamps: dict[OffsetRange, list[int]] = {}

    def read_split(split: OffsetRange, _config: Any, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        result: SplitResult = kwargs["result"]
        micros = stamps[split]
        for at in range(split.start, split.end, 7):
            offsets = range(at, min(at + 7, split.end))
            batch = model_batch(split, offsets, [micros[o - split.start] for o in offsets])
            result.rows += batch.num_rows
            result.bytes += sum(len(f"v{o}") for o in offsets)
            yield batch

    def read_splits(
        splits: list[OffsetRange], config: Any, results: list[SplitResult], **kwargs: Any
    ) -> Iterator[tuple[int, pa.RecordBatch]]:
        # The packed reader's contract: (index, batch), each split's batches in order.
        for index, split in enumerate(splits):
            for batch in read_split(split, config, **{**kwargs, "result": results[index]}):
                yield index, batch

    monkeypatch.setattr(split_writer, "read_split", read_split)
    monkeypatch.setattr(split_writer, "read_splits", read_splits)
    return stamps
