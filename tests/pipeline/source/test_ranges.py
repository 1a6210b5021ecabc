"""Tests for sluice.pipeline.source.ranges: the range type, resolution against the log,
splitting."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.source.options import InvalidPositiveIntegerError, complete_offsets
from sluice.pipeline.source.ranges import (
    DataLoss,
    InvalidOffsetRangeError,
    LogBounds,
    OffsetRange,
    OffsetsOutOfBoundsError,
    PartitionMismatchError,
    UnknownPartitionError,
    resolve_ranges,
    resume_ranges,
    split_ranges,
)

bounded = settings(max_examples=60, deadline=None, database=None)

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


# --------------------------------------------------------------------------------------------
# OffsetRange
# --------------------------------------------------------------------------------------------


def test_offset_range_count_and_json_round_trip() -> None:
    r = OffsetRange("t", 3, 10, 25)
    assert r.count == 15
    assert r.topic_partition == TopicPartition("t", 3)
    assert r.name() == "t-3[10,25)"
    assert json.loads(json.dumps(r.to_json())) == {
        "topic": "t",
        "partition": 3,
        "start": 10,
        "end": 25,
    }
    assert OffsetRange.from_json(r.to_json()) == r


# --------------------------------------------------------------------------------------------
# Resolution
# --------------------------------------------------------------------------------------------

BOUNDS = {T0: LogBounds(100, 200), T1: LogBounds(0, 50)}


def test_resolve_keywords() -> None:
    result = resolve_ranges(BOUNDS, "earliest", "latest")
    assert result.ranges == [OffsetRange("t", 0, 100, 200), OffsetRange("t", 1, 0, 50)]
    assert result.data_loss == []


def test_resolve_specific_and_markers() -> None:
    result = resolve_ranges(BOUNDS, {"t": {0: 150, 1: -2}}, {"t": {0: -1, 1: 20}})
    assert result.ranges == [OffsetRange("t", 0, 150, 200), OffsetRange("t", 1, 0, 20)]


def test_resolve_in_range_offsets_unchanged() -> None:
    # The article's valid case: M <= A <= N leaves A alone, both bounds inclusive.
    result = resolve_ranges(BOUNDS, {"t": {0: 100, 1: 50}}, "latest")
    assert result.ranges == [OffsetRange("t", 0, 100, 200), OffsetRange("t", 1, 50, 50)]
    assert result.data_loss == []


def test_resolve_requires_exactly_the_assigned_partitions() -> None:
    with pytest.raises(PartitionMismatchError) as info:
        resolve_ranges(BOUNDS, {"t": {0: 150}}, "latest")
    assert "'startingOffsets'" in str(info.value)
    assert "expected [t-0, t-1], found [t-0]" in str(info.value)
    with pytest.raises(UnknownPartitionError, match="x-0"):
        resolve_ranges(BOUNDS, "earliest", "latest", partitions=[TopicPartition("x", 0)])


def test_resolve_start_after_end() -> None:
    with pytest.raises(InvalidOffsetRangeError, match="t-0.*start 180 > end 120"):
        resolve_ranges(BOUNDS, {"t": {0: 180, 1: 0}}, {"t": {0: 120, 1: 10}})


def test_retention_ran_first_fails_by_default() -> None:
    with pytest.raises(OffsetsOutOfBoundsError) as info:
        resolve_ranges(BOUNDS, {"t": {0: 40, 1: 0}}, "latest")
    message = str(info.value)
    assert "t-0" in message and "start offset 40" in message
    assert "log start 100" in message and "log end 200" in message
    assert "failOnDataLoss" in message


def test_retention_ran_first_clamps_to_earliest() -> None:
    result = resolve_ranges(BOUNDS, {"t": {0: 40, 1: 0}}, "latest", fail_on_data_loss=False)
    assert result.ranges[0] == OffsetRange("t", 0, 100, 200)
    assert result.data_loss == [DataLoss("t", 0, "start", 40, 100, 100, 200, 60)]
    assert result.data_loss[0].to_json()["lost"] == 60


def test_whole_requested_range_aged_out() -> None:
    result = resolve_ranges(
        BOUNDS, {"t": {0: 10, 1: 0}}, {"t": {0: 30, 1: 5}}, fail_on_data_loss=False
    )
    assert result.ranges[0] == OffsetRange("t", 0, 100, 100)
    assert result.data_loss[0].lost == 20


def test_recreated_topic_fails_by_default() -> None:
    with pytest.raises(OffsetsOutOfBoundsError, match="t-1: start offset 500 is above the log end"):
        resolve_ranges(BOUNDS, {"t": {0: 100, 1: 500}}, "latest")


def test_recreated_topic_clamps_to_latest() -> None:
    result = resolve_ranges(BOUNDS, {"t": {0: 100, 1: 500}}, "latest", fail_on_data_loss=False)
    assert result.ranges[1] == OffsetRange("t", 1, 50, 50)
    assert result.data_loss == [DataLoss("t", 1, "start", 500, 50, 0, 50, 50)]


def test_end_beyond_log_end() -> None:
    with pytest.raises(OffsetsOutOfBoundsError, match="t-1: end offset 70 is above the log end"):
        resolve_ranges(BOUNDS, "earliest", {"t": {0: -1, 1: 70}})
    result = resolve_ranges(BOUNDS, "earliest", {"t": {0: -1, 1: 70}}, fail_on_data_loss=False)
    assert result.ranges[1] == OffsetRange("t", 1, 0, 50)
    assert result.data_loss == [DataLoss("t", 1, "end", 70, 50, 0, 50, 20)]


def test_log_bounds_validated() -> None:
    with pytest.raises(ValueError, match="log_start=5, log_end=4"):
        LogBounds(5, 4)


@given(
    log_start=st.integers(0, 50),
    length=st.integers(0, 50),
    start=st.integers(-2, 150),
    end_delta=st.integers(0, 150),
)
@bounded
def test_clamped_range_is_inside_the_log(
    log_start: int, length: int, start: int, end_delta: int
) -> None:
    log = LogBounds(log_start, log_start + length)
    start = start if start != -1 else -2  # -1 is not a batch start
    end = max(start, 0) + end_delta
    result = resolve_ranges({T0: log}, {"t": {0: start}}, {"t": {0: end}}, fail_on_data_loss=False)
    (r,) = result.ranges
    assert log.log_start <= r.start <= r.end <= log.log_end
    resolved_start = log.log_start if start == -2 else start
    in_range = log.log_start <= resolved_start <= log.log_end and end <= log.log_end
    assert (result.data_loss == []) == in_range
    if in_range:
        assert (r.start, r.end) == (resolved_start, max(end, resolved_start))
    assert all(d.lost >= 0 for d in result.data_loss)


@given(
    bounds=st.lists(st.tuples(st.integers(0, 100), st.integers(0, 100)), min_size=1, max_size=4),
    committed=st.lists(st.one_of(st.none(), st.integers(0, 250)), min_size=4, max_size=4),
    fail=st.booleans(),
)
@bounded
def test_a_resume_resolves_committed_offsets_as_the_offsets_spec_did(
    bounds: list[tuple[int, int]], committed: list[int | None], fail: bool
) -> None:
    """``resume_ranges`` (the load's plan, offsets as ints) against the model it replaced: the
    committed offsets as a spec (``complete_offsets``, -2 for a partition never loaded) up to
    "latest" through ``resolve_ranges`` — the same ranges, data loss and errors."""
    logs = {TopicPartition("t", p): LogBounds(a, a + n) for p, (a, n) in enumerate(bounds)}
    given_offsets = {TopicPartition("t", p): o for p, o in enumerate(committed) if o is not None}
    spec = complete_offsets({"t": {tp.partition: o for tp, o in given_offsets.items()}}, logs)
    try:
        expected = resolve_ranges(logs, spec, "latest", fail_on_data_loss=fail)
    except OffsetsOutOfBoundsError as exc:
        with pytest.raises(OffsetsOutOfBoundsError) as caught:
            resume_ranges(logs, given_offsets, fail_on_data_loss=fail)
        assert str(caught.value) == str(exc)
        return
    assert resume_ranges(logs, given_offsets, fail_on_data_loss=fail) == expected


def test_a_resume_reads_new_partitions_from_their_log_start() -> None:
    logs = {T0: LogBounds(0, 50), T1: LogBounds(7, 9)}
    resolution = resume_ranges(logs, {T0: 20, TopicPartition("gone", 0): 5}, partitions=[T1, T0])
    assert resolution.ranges == [OffsetRange("t", 0, 20, 50), OffsetRange("t", 1, 7, 9)]
    with pytest.raises(UnknownPartitionError, match=r"\['u-0'\]: expected log bounds"):
        resume_ranges(logs, {}, partitions=[TopicPartition("u", 0)])


# --------------------------------------------------------------------------------------------
# Splitting
# --------------------------------------------------------------------------------------------


def r(partition: int, start: int, end: int) -> OffsetRange:
    return OffsetRange("t", partition, start, end)


def test_no_options_keeps_ranges_and_drops_empty() -> None:
    assert split_ranges([r(0, 1, 5), r(1, 3, 3), r(2, 2, 4)]) == [r(0, 1, 5), r(2, 2, 4)]


def test_min_partitions_splits_one_range_like_spark() -> None:
    # Spark's KafkaOffsetRangeCalculatorSuite "with minPartition = 3: N == 1".
    assert split_ranges([r(0, 1, 5)], min_partitions=3) == [r(0, 1, 2), r(0, 2, 3), r(0, 3, 5)]


def test_min_partitions_ignores_empty_ranges() -> None:
    # SPARK-30656: the empty range neither counts nor gets a split.
    assert split_ranges([r(0, 1, 1), r(1, 1, 21)], min_partitions=3) == [
        r(1, 1, 7),
        r(1, 7, 14),
        r(1, 14, 21),
    ]


def test_min_partitions_met_by_partition_count() -> None:
    assert split_ranges([r(0, 0, 100), r(1, 0, 1)], min_partitions=2) == [
        r(0, 0, 100),
        r(1, 0, 1),
    ]


def test_min_partitions_gives_big_ranges_more_pieces() -> None:
    splits = split_ranges([r(0, 0, 1), r(1, 0, 1), r(2, 0, 1), r(3, 0, 100)], min_partitions=5)
    by_partition = [s.partition for s in splits]
    assert by_partition.count(3) == 2 and len(splits) == 5


def test_min_partitions_is_a_guarantee() -> None:
    # Spark rounds each of three equal ranges to one piece (3 < 4); Sluice tops up.
    splits = split_ranges([r(0, 0, 10), r(1, 0, 10), r(2, 0, 10)], min_partitions=4)
    assert len(splits) == 4
    assert splits[:2] == [r(0, 0, 5), r(0, 5, 10)]


def test_max_records_per_partition() -> None:
    assert split_ranges([r(0, 0, 12), r(1, 0, 5)], max_records_per_partition=5) == [
        r(0, 0, 4),
        r(0, 4, 8),
        r(0, 8, 12),
        r(1, 0, 5),
    ]


def test_split_options_must_be_positive() -> None:
    with pytest.raises(
        InvalidPositiveIntegerError,
        match="maxRecordsPerPartition: expected a positive integer, found 0",
    ):
        split_ranges([r(0, 0, 1)], max_records_per_partition=0)


ranges_strategy = st.lists(
    st.tuples(st.integers(0, 1000), st.integers(0, 300)), min_size=0, max_size=8
).map(lambda pairs: [r(i, s, s + n) for i, (s, n) in enumerate(pairs)])


@given(
    ranges=ranges_strategy,
    min_partitions=st.none() | st.integers(1, 40),
    max_records=st.none() | st.integers(1, 120),
)
@bounded
def test_split_properties(
    ranges: list[OffsetRange], min_partitions: int | None, max_records: int | None
) -> None:
    splits = split_ranges(
        ranges, min_partitions=min_partitions, max_records_per_partition=max_records
    )
    # Every offset of every range exactly once, and nothing else.
    covered = sorted((s.partition, o) for s in splits for o in range(s.start, s.end))
    expected = sorted((x.partition, o) for x in ranges for o in range(x.start, x.end))
    assert covered == expected
    assert all(s.count > 0 for s in splits)
    if max_records is not None:
        assert all(s.count <= max_records for s in splits)
    total = sum(x.count for x in ranges)
    if min_partitions is not None and total >= min_partitions:
        assert len(splits) >= min_partitions
    # Pieces of one partition stay in offset order and contiguous.
    for partition in {s.partition for s in splits}:
        pieces = [s for s in splits if s.partition == partition]
        assert all(a.end == b.start for a, b in zip(pieces, pieces[1:], strict=False))


def test_timestamp_offsets_follow_sparks_read_timestamp_offsets() -> None:
    from sluice.pipeline.source.options import TimestampSpec
    from sluice.pipeline.source.ranges import (
        NoMatchingOffsetError,
        PartitionMismatchError,
        timestamp_offsets,
    )

    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    every = TimestampSpec("startingTimestamp", every=500)
    assert every.timestamps([a, b]) == {a: 500, b: 500}
    assert timestamp_offsets(every, [a, b], {a: 3, b: 7}, starting=True) == {"t": {0: 3, 1: 7}}
    # No record that late: an error for a start, latest with the strategy, latest for an end.
    with pytest.raises(NoMatchingOffsetError, match="topic-partition t-1 and timestamp 500"):
        timestamp_offsets(every, [a, b], {a: 3, b: None}, starting=True)
    lenient = TimestampSpec("startingTimestamp", every=500, on_no_match="latest")
    assert timestamp_offsets(lenient, [a, b], {a: 3}, starting=True) == {"t": {0: 3, 1: -1}}
    ending = TimestampSpec("endingTimestamp", every=500)
    assert timestamp_offsets(ending, [a, b], {a: None, b: 2}, starting=False) == {
        "t": {0: -1, 1: 2}
    }
    # Per partition: -2 / -1 need no lookup; the JSON must name the assigned partitions.
    json_spec = TimestampSpec("startingOffsetsByTimestamp", per_partition={"t": {0: -2, 1: -1}})
    assert timestamp_offsets(json_spec, [a, b], {}, starting=True) == {"t": {0: -2, 1: -1}}
    with pytest.raises(PartitionMismatchError, match=r"expected \[t-0, t-1\], found \[t-0\]"):
        timestamp_offsets(
            TimestampSpec("startingOffsetsByTimestamp", per_partition={"t": {0: 1}}),
            [a, b],
            {a: 0},
            starting=True,
        )


# -- packing ------------------------------------------------------------------------------------


def test_pack_splits_groups_small_ranges_in_order_and_keeps_large_ones_alone() -> None:
    from sluice.pipeline.source.ranges import pack_splits

    small = [OffsetRange(f"t{i}", p, 0, 100) for i in range(5) for p in range(4)]
    big = OffsetRange("big", 0, 0, 1_000)
    tasks = pack_splits([*small, big], 450)
    assert [len(t) for t in tasks] == [4, 4, 4, 4, 4, 1]
    assert [s for t in tasks for s in t] == [*small, big]  # every split once, in order
    assert all(sum(s.count for s in t) <= 450 for t in tasks[:-1])
    assert pack_splits([], 10) == []
    with pytest.raises(InvalidPositiveIntegerError):
        pack_splits(small, 0)
