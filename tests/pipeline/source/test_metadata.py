"""Tests for sluice.pipeline.source.metadata: the driver's log bounds against a real broker with
transactions — the log end is the last stable offset under read_committed (the default) — and
the ``fetchOffset.numRetries`` / ``fetchOffset.retryIntervalMs`` retry loop against a port that
refuses connections and against a broker that is down for the first attempt only."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.source import metadata as metadata_module
from sluice.pipeline.source.metadata import KafkaMetadata, MetadataError
from sluice.pipeline.source.options import Subscribe
from sluice.pipeline.source.ranges import LogBounds
from sluice.pipeline.source.split_reader import consumer_config
from sluice.testing.broker import create_topic
from sluice.testing.cluster import QUIET
from tests.pipeline.broker_fixture import SluiceBroker
from tests.pipeline.source.transactional import write_mixed_log

pytestmark = pytest.mark.broker


def test_log_ends_are_the_lso_under_read_committed_and_the_high_watermark_otherwise(
    kafka_broker: Any, topic_name: str
) -> None:
    log = write_mixed_log(kafka_broker.bootstrap, topic_name)
    try:
        assert log.lso < log.high_watermark  # o0's transaction is open
        tp = TopicPartition(topic_name, 0)
        options = {"kafka.bootstrap.servers": kafka_broker.bootstrap}
        with KafkaMetadata(consumer_config(options)) as metadata:  # the load plans this way
            assert metadata.bounds([tp]) == {tp: LogBounds(0, log.lso)}
            assigned, bounds = metadata.assigned_bounds(Subscribe([topic_name]))
            assert assigned == [tp] and bounds == {tp: LogBounds(0, log.lso)}
        uncommitted = consumer_config({**options, "kafka.isolation.level": "read_uncommitted"})
        with KafkaMetadata(uncommitted) as metadata:
            assert metadata.bounds([tp]) == {tp: LogBounds(0, log.high_watermark)}
        log.commit_open()
        # Its marker (written a moment after the commit returns) moves the LSO past c4 too.
        deadline = time.monotonic() + 10
        with KafkaMetadata(consumer_config(options)) as metadata:
            while (end := metadata.bounds([tp])[tp].log_end) == log.lso:
                assert time.monotonic() < deadline, "the LSO did not move after the commit"
                time.sleep(0.1)
        assert end == log.high_watermark + 1
    finally:
        log.close()


# -- fetchOffset.numRetries / fetchOffset.retryIntervalMs ---------------------------------------

# librdkafka waits out the whole timeout of a lookup while no broker answers: short attempts.
ATTEMPT_TIMEOUT_S = 0.5


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A port bound on 127.0.0.1 but not listening: every connection to it is refused, and no
    other process can take it during the test."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def _config(bootstrap: str) -> dict[str, Any]:
    return {**consumer_config({"kafka.bootstrap.servers": bootstrap}), **QUIET}


def _attempt_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "sluice.source" and "attempt" in r.message]


@pytest.mark.parametrize("attempts", [1, 3])
def test_every_attempt_refused_then_the_error_names_the_attempts(
    refused_port: int, caplog: pytest.LogCaptureFixture, attempts: int
) -> None:
    interval = 0.6
    caplog.set_level(logging.WARNING, logger="sluice.source")
    began = time.monotonic()
    with (
        KafkaMetadata(
            _config(f"127.0.0.1:{refused_port}"),
            ATTEMPT_TIMEOUT_S,
            attempts=attempts,
            retry_interval_s=interval,
        ) as metadata,
        pytest.raises(MetadataError) as caught,
    ):
        metadata.partitions_per_topic()
    failed_at, failed_wall = time.monotonic(), time.time()  # records carry wall-clock times
    assert type(caught.value) is MetadataError
    last = "metadata request: expected an answer, found "
    if attempts > 1:
        last = (
            f"a metadata request: expected an answer within {attempts} attempts 0.6 s apart "
            f"(fetchOffset.numRetries, fetchOffset.retryIntervalMs), found the last failing "
            f"with: {last}"
        )
    assert str(caught.value).startswith(last), caught.value

    # numRetries attempts in all (Spark's count): a warning for each but the last, which raises.
    warnings = _attempt_warnings(caplog)
    assert [r.getMessage().split(" failed:")[0] for r in warnings] == [
        f"attempt {k} of {attempts} of a metadata request" for k in range(1, attempts)
    ]
    # Spaced by the interval: each attempt starts `interval` after the previous one failed and
    # itself lasts (about) the lookup's timeout, so consecutive failures are at least `interval`
    # apart and not much more than interval + timeout.
    failures = [r.created for r in warnings] + [failed_wall]
    for before, after in zip(failures, failures[1:], strict=False):
        assert interval <= after - before < interval + ATTEMPT_TIMEOUT_S + 2.0, failures
    elapsed = failed_at - began
    assert (attempts - 1) * interval <= elapsed < attempts * (ATTEMPT_TIMEOUT_S + interval) + 3.0


def test_a_broker_back_before_the_next_attempt_answers_it(
    tmp_path: Path, topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The broker is down for the first attempt; the warning of that attempt starts it again
    (on this thread, before the interval's sleep), and the second attempt gets the answer."""
    broker = SluiceBroker(tmp_path / "broker")
    broker.start()
    try:
        create_topic(broker.bootstrap, topic_name, 2)
        broker.stop()

        class StartOnFirstFailure(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if "attempt 1 of 3" in record.getMessage() and not broker.running:
                    broker.start()

        caplog.set_level(logging.WARNING, logger="sluice.source")
        starter = StartOnFirstFailure()
        logging.getLogger("sluice.source").addHandler(starter)
        try:
            # 3 s: the second attempt connects within librdkafka's reconnect backoff (QUIET: 0.5 s).
            with KafkaMetadata(
                _config(broker.bootstrap), 3.0, attempts=3, retry_interval_s=0.2
            ) as metadata:
                counts = metadata.partitions_per_topic()
        finally:
            logging.getLogger("sluice.source").removeHandler(starter)
        assert counts.get(topic_name) == 2, counts
        assert [r.getMessage().split(" failed:")[0] for r in _attempt_warnings(caplog)] == [
            "attempt 1 of 3 of a metadata request"
        ]
    finally:
        if broker.running:
            broker.stop()


@pytest.mark.parametrize(
    ("given", "expected"),
    [({}, 10), ({"reconnect.backoff.ms": "250"}, "250"), ({"reconnect.backoff.max.ms": 500}, None)],
)
def test_the_handle_reconnects_after_10_ms_unless_the_config_sets_a_backoff(
    monkeypatch: pytest.MonkeyPatch, given: dict[str, Any], expected: Any
) -> None:
    """A fresh handle's first Metadata answer waits half of ``reconnect.backoff.ms`` when
    librdkafka retires the bootstrap connection under it (``_RECONNECT_BACKOFF``): the driver's
    handle asks for 10 ms, and a config that sets either backoff keeps its own."""
    created: list[dict[str, Any]] = []

    class Recording(metadata_module.Consumer):  # type: ignore[misc,name-defined]
        def __init__(self, config: dict[str, Any]) -> None:
            created.append(config)
            super().__init__(config)

    monkeypatch.setattr(metadata_module, "Consumer", Recording)
    with KafkaMetadata({"bootstrap.servers": "127.0.0.1:9", "group.id": "g", **given}):
        pass
    assert created[-1].get("reconnect.backoff.ms") == expected
    assert created[-1].get("reconnect.backoff.max.ms") == given.get("reconnect.backoff.max.ms")
