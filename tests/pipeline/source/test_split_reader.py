"""Tests for sluice.pipeline.source.split_reader: the executor-side reader alone (no Spark),
against a real broker."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from sluice.pipeline.source.ranges import OffsetRange
from sluice.pipeline.source.split_reader import (
    ARROW_SCHEMA,
    ARROW_SCHEMA_NO_HEADERS,
    DataLossError,
    SplitResult,
    SplitTimeoutError,
    consumer_config,
    consumer_settings,
    read_split,
)
from sluice.testing.broker import create_topic
from tests.pipeline.broker_fixture import produce, simple_records
from tests.pipeline.source.transactional import MixedLog, write_mixed_log

pytestmark = pytest.mark.broker


def test_reader_bounds_a_range_inside_compressed_batches(
    kafka_broker: Any, topic_name: str
) -> None:
    """Big lz4 batches: a range that starts and ends mid-batch gets exactly its offsets;
    the records of the fetched batch past ``end`` are dropped."""
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    produce(
        kafka_broker.bootstrap,
        simple_records(topic_name, 1, 500),
        compression="lz4",
        linger_ms=50,
        batch_size=1_000_000,
    )
    config = consumer_config({"kafka.bootstrap.servers": kafka_broker.bootstrap})
    for start, end in ((13, 27), (0, 1), (499, 500), (250, 500), (100, 100)):
        split = OffsetRange(topic_name, 0, start, end)
        result = SplitResult(split)
        batches = list(read_split(split, config, batch_rows=7, result=result))
        offsets = [o for b in batches for o in b.column("offset").to_pylist()]
        assert offsets == list(range(start, end))
        assert result.rows == end - start
        assert all(b.num_rows <= 7 and b.schema.equals(ARROW_SCHEMA) for b in batches)


def test_reader_detects_offsets_that_are_gone(kafka_broker: Any, topic_name: str) -> None:
    """A split planned past what the log holds (truncation/recreation) is data loss: the
    reader fails by default and stops at the log end otherwise."""
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    produce(kafka_broker.bootstrap, simple_records(topic_name, 1, 10))
    config = consumer_config({"kafka.bootstrap.servers": kafka_broker.bootstrap})
    split = OffsetRange(topic_name, 0, 5, 30)
    with pytest.raises(DataLossError, match=rf"{topic_name}-0: expected offsets \[10, 30\)"):
        list(read_split(split, config, poll_timeout_s=20))
    result = SplitResult(split)
    batches = list(
        read_split(split, config, fail_on_data_loss=False, poll_timeout_s=20, result=result)
    )
    assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(5, 10))
    assert result.lost == 20


def _mixed_records(topic: str, count: int) -> list[dict[str, Any]]:
    """Null and empty keys and values, headers (some with null values) on some records,
    explicit timestamps: every shape a column of ``ARROW_SCHEMA`` can hold."""
    records: list[dict[str, Any]] = []
    for i in range(count):
        record: dict[str, Any] = {
            "topic": topic,
            "partition": 0,
            "key": None if i % 3 == 0 else (b"" if i % 7 == 0 else f"k{i}".encode()),
            "value": None if i % 5 == 0 else (b"" if i % 11 == 0 else bytes([i % 256]) * i),
            "timestamp": 1_700_000_000_000 + i,
        }
        if i % 4 == 1:
            record["headers"] = [("h", f"v{i}".encode()), ("null", None), ("é", b"")]
        records.append(record)
    return records


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_reader_columns_match_the_produced_records(
    kafka_broker: Any, topic_name: str, codec: str
) -> None:
    """Every column of every row, for every codec, equals what the producer delivered at that
    offset, and ``rows``/``bytes`` count it as Spark would (key + value + header bytes)."""
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    sent = produce(
        kafka_broker.bootstrap,
        _mixed_records(topic_name, 300),
        compression=codec,
        linger_ms=20,
        batch_size=20_000,
    )
    config = consumer_config({"kafka.bootstrap.servers": kafka_broker.bootstrap})
    start, end = 3, 290
    split = OffsetRange(topic_name, 0, start, end)
    result = SplitResult(split)
    batches = list(read_split(split, config, batch_rows=13, result=result))
    assert all(b.num_rows <= 13 and b.schema.equals(ARROW_SCHEMA) for b in batches)
    rows = [row for b in batches for row in b.to_pylist()]
    expected = sorted((p for p in sent if start <= p.offset < end), key=lambda p: p.offset)
    assert [r["offset"] for r in rows] == [p.offset for p in expected]
    for row, produced in zip(rows, expected, strict=True):
        assert (row["key"], row["value"]) == (produced.key, produced.value)
        assert (row["topic"], row["partition"]) == (topic_name, 0)
        assert int(row["timestamp"].timestamp() * 1000) == produced.timestamp_ms
        assert row["timestampType"] == 0  # CreateTime
        headers = produced.headers
        assert row["headers"] == ([{"key": k, "value": v} for k, v in headers] if headers else None)
    assert result.rows == len(expected)
    assert result.bytes == sum(
        len(p.key or b"")
        + len(p.value or b"")
        + sum(len(k.encode()) + len(v or b"") for k, v in p.headers or ())
        for p in expected
    )


def test_reader_without_headers_and_in_big_batches(kafka_broker: Any, topic_name: str) -> None:
    """``include_headers=False`` gives ``ARROW_SCHEMA_NO_HEADERS``; a batch size above what one
    ``consume()`` returns still yields whole batches of exactly the range."""
    create_topic(kafka_broker.bootstrap, topic_name, 1)
    produce(kafka_broker.bootstrap, simple_records(topic_name, 1, 25_000), linger_ms=50)
    config = consumer_config({"kafka.bootstrap.servers": kafka_broker.bootstrap})
    batches = list(
        read_split(
            OffsetRange(topic_name, 0, 10, 24_990), config, include_headers=False, batch_rows=12_000
        )
    )
    assert [b.num_rows for b in batches] == [12_000, 12_000, 980]
    assert all(b.schema.equals(ARROW_SCHEMA_NO_HEADERS) for b in batches)
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    assert offsets == list(range(10, 24_990))


# -- transactions: read_committed (the default) and read_uncommitted ----------------------------


def _read_values(
    log: MixedLog, start: int, end: int, config: dict[str, Any], **kwargs: Any
) -> tuple[list[tuple[int, str]], SplitResult]:
    split = OffsetRange(log.topic, 0, start, end)
    result = SplitResult(split)
    batches = read_split(split, config, result=result, **kwargs)
    got = [
        (offset, value.decode())
        for b in batches
        for offset, value in zip(
            b.column("offset").to_pylist(), b.column("value").to_pylist(), strict=True
        )
    ]
    return got, result


def test_read_committed_yields_exactly_the_committed_records(
    kafka_broker: Any, topic_name: str
) -> None:
    """Committed, aborted, plain and open-transaction records in one partition: the default
    reader of ``[0, LSO)`` gets the committed and plain ones and nothing else, with no data
    loss counted for the aborted records and markers it skipped; ``read_uncommitted`` of
    ``[0, high watermark)`` gets every data record."""
    log = write_mixed_log(kafka_broker.bootstrap, topic_name)
    try:
        config = consumer_config({"kafka.bootstrap.servers": kafka_broker.bootstrap})
        got, result = _read_values(log, 0, log.lso, config, batch_rows=2, poll_timeout_s=20)
        assert got == log.visible_committed()
        assert [v for _, v in got] == ["c0", "c1", "c2", "p0", "c3"]
        assert result.rows == 5 < log.lso and result.lost == 0
        uncommitted = consumer_config(
            {"kafka.bootstrap.servers": kafka_broker.bootstrap,
             "kafka.isolation.level": "read_uncommitted"}
        )  # fmt: skip
        got, result = _read_values(log, 0, log.high_watermark, uncommitted, poll_timeout_s=20)
        assert got == log.everything()
        assert sorted(v for _, v in got) == ["a0", "a1", "c0", "c1", "c2", "c3", "c4", "o0", "p0"]
        assert result.lost == 0
    finally:
        log.close()


def test_ranges_ending_on_markers_or_aborted_records_end_by_offset(
    kafka_broker: Any, topic_name: str
) -> None:
    """A range is done when the next offset reaches its end, not after ``end - start`` records:
    ranges whose last offsets (or all of them) are aborted records or transaction markers end
    at once, with what is committed in them."""
    log = write_mixed_log(kafka_broker.bootstrap, topic_name, leave_open=False)
    config = consumer_config({"kafka.bootstrap.servers": kafka_broker.bootstrap})
    aborted = sorted(log.offsets[v] for v in log.aborted)
    abort_marker = aborted[-1] + 1
    commit_marker = log.offsets["c2"] + 1
    cases = [
        (0, commit_marker + 1),  # ends on the first commit marker
        (0, abort_marker + 1),  # ends on aborted records and their marker
        (aborted[0], abort_marker + 1),  # nothing but aborted records and a marker
        (commit_marker, commit_marker + 1),  # a marker alone
        (0, log.lso),  # up to the LSO: the last offset is c3's commit marker
        (aborted[1], log.lso),
    ]
    for start, end in cases:
        began = time.monotonic()
        got, result = _read_values(log, start, end, config, poll_timeout_s=20)
        assert got == log.below(log.committed, end, start), (start, end)
        assert result.lost == 0, (start, end)
        assert time.monotonic() - began < 10, f"[{start}, {end}) waited for records"


def test_read_committed_waits_for_an_open_transaction_inside_the_range(
    kafka_broker: Any, topic_name: str
) -> None:
    """A range past the LSO (planned by high watermark) is not data loss under read_committed:
    the reader waits for the open transaction, and reads its records once it commits."""
    log = write_mixed_log(kafka_broker.bootstrap, topic_name)
    try:
        config = consumer_config({"kafka.bootstrap.servers": kafka_broker.bootstrap})
        committer = threading.Timer(2.0, log.commit_open)
        committer.start()
        try:
            got, result = _read_values(log, 0, log.high_watermark, config, poll_timeout_s=30)
        finally:
            committer.join()
        assert log.open_values == []  # committed by the timer
        assert got == log.below(log.committed, log.high_watermark)
        assert [v for _, v in got] == ["c0", "c1", "c2", "p0", "c3", "o0", "c4"]
        assert result.lost == 0
    finally:
        log.close()


def test_a_transaction_that_stays_open_times_out_the_split_saying_why(
    kafka_broker: Any, topic_name: str
) -> None:
    log = write_mixed_log(kafka_broker.bootstrap, topic_name)
    try:
        config = consumer_config({"kafka.bootstrap.servers": kafka_broker.bootstrap})
        with pytest.raises(
            SplitTimeoutError,
            match=rf"expected offsets up to {log.high_watermark}; read_committed reads up to "
            rf"the last stable offset {log.lso}, and a transaction open since then holds",
        ):
            _read_values(log, 0, log.high_watermark, config, poll_timeout_s=3)
    finally:
        log.close()


def test_read_committed_still_detects_offsets_that_are_gone(
    kafka_broker: Any, topic_name: str
) -> None:
    """A range past the log end is data loss under read_committed too, and the aborted records
    and markers skipped on the way are not counted as lost."""
    log = write_mixed_log(kafka_broker.bootstrap, topic_name, leave_open=False)
    config = consumer_config({"kafka.bootstrap.servers": kafka_broker.bootstrap})
    end = log.high_watermark + 20
    with pytest.raises(
        DataLossError,
        match=rf"{topic_name}-0: expected offsets \[{log.high_watermark}, {end}\) in the log, "
        rf"found the log ending at {log.high_watermark}",
    ):
        _read_values(log, 0, end, config, poll_timeout_s=20)
    got, result = _read_values(log, 0, end, config, fail_on_data_loss=False, poll_timeout_s=20)
    assert got == log.visible_committed()
    assert result.lost == 20


def test_consumer_settings_take_librdkafka_keys_and_one_group_id() -> None:
    """``consumer_settings`` takes librdkafka's keys (no ``kafka.`` prefix): a caller that builds
    them once has one group id for all its consumers, a given ``group.id`` wins, and the keys
    the reader owns stay its own; ``consumer_config`` is the same from ``kafka.*`` options."""
    settings = consumer_settings({"bootstrap.servers": "h:1"}, group_id="sluice-load-r1")
    assert (settings["bootstrap.servers"], settings["group.id"]) == ("h:1", "sluice-load-r1")
    given = {"bootstrap.servers": "h:1", "group.id": "mine", "enable.auto.commit": "true"}
    assert consumer_settings(given, group_id="sluice-load-r1")["group.id"] == "mine"
    assert consumer_settings(given)["enable.auto.commit"] is False
    assert consumer_settings({"bootstrap.servers": "h:1"})["group.id"].startswith("sluice-source-")
    with pytest.raises(ValueError, match="kafka.bootstrap.servers': expected host:port"):
        consumer_settings({"group.id": "g"})
    options = {"kafka.bootstrap.servers": "h:1", "kafka.group.id": "g", "subscribe": "t"}
    assert consumer_config(options) == consumer_settings({"bootstrap.servers": "h:1"}, group_id="g")


def test_the_reader_refetches_soon_after_its_prefetch_queue_was_full() -> None:
    """librdkafka's default fetch.queue.backoff.ms (1 s) idles a split task that drains its
    prefetch queue faster; the reader sets 10 ms, and a ``kafka.*`` option still wins."""
    assert consumer_config({"kafka.bootstrap.servers": "h:1"})["fetch.queue.backoff.ms"] == 10
    given = {"kafka.bootstrap.servers": "h:1", "kafka.fetch.queue.backoff.ms": "250"}
    assert consumer_config(given)["fetch.queue.backoff.ms"] == "250"
