"""OffsetForLeaderEpoch against a standalone broker, by hand over the wire: where an epoch
ended in the leader's log, and the leader-epoch checks (KIP-101, KIP-320); and Fetch v12's
diverging epochs (KIP-320)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.records import encode_batch
from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.broker.server.fetch_session import CachedPartition
from sluice.broker.server.handlers.fetch import _diverging_epoch
from sluice.common.topic_partition import TopicPartition
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.clients import unique
from tests.broker.server.wire import WireClient, request

pytestmark = pytest.mark.broker


def _epoch_end(wire: WireClient, topic: str, leader_epoch: int, current: int = -1) -> Any:
    body = request(
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        3,
        {
            "replica_id": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": current,
                            "leader_epoch": leader_epoch,
                        }
                    ],
                }
            ],
        },
    )
    return wire.call(body).topics[0].partitions[0]


def test_the_current_epoch_ends_at_the_log_end(broker: BrokerProcess) -> None:
    topic = unique("epochs")
    create_topic(broker.bootstrap, topic)
    with WireClient(broker.port) as wire:
        batch = encode_batch([(None, b"a"), (None, b"b"), (None, b"c")])
        assert wire.produce(topic, 0, batch).error_code == Errors.NONE
        answer = _epoch_end(wire, topic, 0)
        # Standalone, the only leader epoch is 0, and it ends at the log end.
        assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (Errors.NONE, 0, 3)
        # An epoch newer than any in the log: the largest one <= it, the current one.
        later = _epoch_end(wire, topic, 5)
        assert (later.error_code, later.leader_epoch, later.end_offset) == (Errors.NONE, 0, 3)


def test_leader_epoch_checks_and_unknown_partitions(broker: BrokerProcess) -> None:
    topic = unique("epochs")
    create_topic(broker.bootstrap, topic)
    with WireClient(broker.port) as wire:
        # The client believes in a newer leader epoch than this leader has.
        assert _epoch_end(wire, topic, 0, current=1).error_code == Errors.UNKNOWN_LEADER_EPOCH
        assert _epoch_end(wire, topic, 0, current=0).error_code == Errors.NONE
        missing = _epoch_end(wire, unique("no-such-topic"), 0)
        assert missing.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert (missing.leader_epoch, missing.end_offset) == (-1, -1)


def _fetch_v12(wire: WireClient, topic: str, offset: int, last_fetched_epoch: int) -> Any:
    """One Fetch v12 (flexible) of partition 0, waiting up to 5 s for a byte."""
    body = request(ApiKey.FETCH, 12, {
        "max_wait": 5000, "min_bytes": 1, "max_bytes": 1 << 20,
        "topics": [{"topic": topic, "partitions": [{
            "partition": 0, "current_leader_epoch": 0, "fetch_offset": offset,
            "last_fetched_epoch": last_fetched_epoch, "log_start_offset": -1,
            "partition_max_bytes": 1 << 20,
        }]}],
        "forgotten_topics_data": [],
    })  # fmt: skip
    return wire.call(body).responses[0].partitions[0]


def test_fetch_v12_answers_a_diverging_epoch_at_once(broker: BrokerProcess) -> None:
    """KIP-320: a fetch whose last fetched epoch ended, in this log, before its fetch offset is
    answered at once with that epoch and its end offset and no records, so the client
    truncates there; one that agrees with the log reads as before."""
    topic = unique("diverging")
    create_topic(broker.bootstrap, topic)
    with WireClient(broker.port) as wire:
        batch = encode_batch([(None, b"a"), (None, b"b"), (None, b"c")])
        assert wire.produce(topic, 0, batch).error_code == Errors.NONE
        agrees = _fetch_v12(wire, topic, 2, last_fetched_epoch=0)
        assert agrees.error_code == Errors.NONE and agrees.records
        assert agrees.diverging_epoch.epoch == -1  # not set: the default
        started = time.monotonic()
        # The client read epoch 0 up to offset 5; this log's epoch 0 ends at 3.
        diverged = _fetch_v12(wire, topic, 5, last_fetched_epoch=0)
        assert time.monotonic() - started < 2.5  # not after max_wait's 5 s
        assert diverged.error_code == Errors.NONE
        assert (diverged.diverging_epoch.epoch, diverged.diverging_epoch.end_offset) == (0, 3)
        assert not diverged.records
        assert diverged.high_watermark == 3
        # Without a last fetched epoch the same offset is out of range, as before v12.
        assert _fetch_v12(wire, topic, 5, -1).error_code == Errors.OFFSET_OUT_OF_RANGE


def test_an_epoch_older_than_the_log_diverges_where_the_log_begins(tmp_path: Path) -> None:
    """Kafka's ``Partition.readRecords`` on a log whose epoch 0 retention removed: a fetch
    whose last fetched epoch is 0 diverged where the log's history begins (epoch 3's start;
    before, epoch 0 could not be placed: out of range); a fetch offset below the log start is
    out of range, diverging or not."""
    log = Log(tmp_path / "events-0", LogConfig(segment_bytes=200, retention_ms=-1))
    try:
        for epoch in (0, 0, 3, 3):  # offsets 0..3 of epoch 0, 4..7 of epoch 3
            log.append(encode_batch([(None, b"a"), (None, b"b")]), leader_epoch=epoch)
        log.increment_log_start_offset(4)

        def fetch(offset: int, last_fetched_epoch: int) -> Any:
            tp = TopicPartition("events", 0)
            return _diverging_epoch(log, CachedPartition(tp, offset, 1 << 20, 3, -1,
                                                         last_fetched_epoch))  # fmt: skip

        assert fetch(6, 0) == (0, 4)  # read epoch 0 up to 6: it ended at 4 here
        assert fetch(4, 0) is None  # epoch 0 ended at 4, where this fetch starts
        assert fetch(2, 0) == Errors.OFFSET_OUT_OF_RANGE  # below the log start
        assert fetch(6, 3) is None
        # An epoch this log never had, after its latest: diverged where epoch 3 ends.
        assert fetch(6, 5) == (3, 8)
    finally:
        log.close()
