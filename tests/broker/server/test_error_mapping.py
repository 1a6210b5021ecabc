"""Domain exceptions → Kafka error codes, in the one module the handlers use, per API family."""

from __future__ import annotations

import pytest

from sluice.broker.cluster import topic_metadata as tm
from sluice.broker.cluster.partition_admin import NotControllerError
from sluice.broker.groups.offset_store import OffsetCommitFailedError
from sluice.broker.log import errors as le
from sluice.broker.log.log_mover import LogMoveCancelledError
from sluice.broker.protocol.errors import Errors
from sluice.broker.server.error_mapping import (
    ADMIN_ERRORS,
    CONTROLLER_ERRORS,
    code_for,
    controller_code_for,
    coordinator_code_for,
    log_dir_code_for,
)
from sluice.common.topic_partition import InvalidTopicError

CASES = [
    (le.OffsetOutOfRangeError("x", offset=9, log_start=0, log_end=5), Errors.OFFSET_OUT_OF_RANGE),
    (le.CorruptRecordError("x"), Errors.CORRUPT_MESSAGE),
    (le.InvalidRecordError("x"), Errors.INVALID_RECORD),
    (le.RecordBatchTooLargeError("x"), Errors.MESSAGE_TOO_LARGE),
    (le.OutOfOrderSequenceError("x"), Errors.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (le.InvalidProducerEpochError("x"), Errors.INVALID_PRODUCER_EPOCH),
    (le.UnknownProducerIdError("x"), Errors.UNKNOWN_PRODUCER_ID),
    (le.LogDirectoryError("x"), Errors.KAFKA_STORAGE_ERROR),  # any other storage error
    (InvalidTopicError("x"), Errors.INVALID_TOPIC_EXCEPTION),
    (tm.TopicExistsError("x"), Errors.TOPIC_ALREADY_EXISTS),
    (tm.UnknownTopicError("x"), Errors.UNKNOWN_TOPIC_OR_PARTITION),
    (tm.InvalidPartitionsError("x"), Errors.INVALID_PARTITIONS),
    (tm.InvalidReplicationFactorError("x"), Errors.INVALID_REPLICATION_FACTOR),
    (tm.InvalidConfigError("x"), Errors.INVALID_CONFIG),
    (tm.MetadataUnavailableError("x"), Errors.REQUEST_TIMED_OUT),
    (OSError(28, "No space left on device"), Errors.KAFKA_STORAGE_ERROR),
    (RuntimeError("a bug"), Errors.UNKNOWN_SERVER_ERROR),
]


@pytest.mark.parametrize(("exc", "code"), CASES, ids=[type(e).__name__ for e, _ in CASES])
def test_each_exception_maps_to_its_code(exc: BaseException, code: Errors) -> None:
    assert code_for(exc) is code


def test_admin_errors_are_answered_not_fatal() -> None:
    # A bad topic name is a ValueError, not a TopicError: CreateTopics must still answer it.
    for exc, _ in CASES[:-1]:
        assert isinstance(exc, ADMIN_ERRORS), exc


def test_coordinator_apis_send_the_client_looking_for_the_coordinator() -> None:
    moved = OffsetCommitFailedError(Errors.NOT_LEADER_OR_FOLLOWER, "moved")
    short = OffsetCommitFailedError(Errors.NOT_ENOUGH_REPLICAS, "isr too small")
    assert coordinator_code_for(moved) is Errors.NOT_COORDINATOR
    assert coordinator_code_for(short) is Errors.COORDINATOR_NOT_AVAILABLE
    assert coordinator_code_for(tm.MetadataUnavailableError("zk down")) is (
        Errors.COORDINATOR_NOT_AVAILABLE
    )
    assert coordinator_code_for(le.CorruptRecordError("x")) is Errors.CORRUPT_MESSAGE


def test_controller_apis_send_the_client_to_the_controller_or_time_out() -> None:
    not_controller = NotControllerError("broker 2 is the controller")
    timed_out = TimeoutError("no answer within 30000 ms")
    assert controller_code_for(not_controller) is Errors.NOT_CONTROLLER
    # A TimeoutError is an OSError: code_for alone would call it a storage error.
    assert code_for(timed_out) is Errors.KAFKA_STORAGE_ERROR
    assert controller_code_for(timed_out) is Errors.REQUEST_TIMED_OUT
    assert isinstance(not_controller, CONTROLLER_ERRORS)
    assert isinstance(timed_out, CONTROLLER_ERRORS)
    assert controller_code_for(RuntimeError("a bug")) is Errors.UNKNOWN_SERVER_ERROR


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (KeyError("t-0"), Errors.REPLICA_NOT_AVAILABLE),
        (LogMoveCancelledError("cancelled"), Errors.KAFKA_STORAGE_ERROR),
        (le.CorruptRecordError("x"), Errors.KAFKA_STORAGE_ERROR),  # not CORRUPT_MESSAGE here
        (OSError(5, "Input/output error"), Errors.KAFKA_STORAGE_ERROR),
        (RuntimeError("a bug"), Errors.UNKNOWN_SERVER_ERROR),
    ],
    ids=["KeyError", "LogMoveCancelledError", "CorruptRecordError", "OSError", "RuntimeError"],
)
def test_log_dir_apis_answer_storage_failures_as_such(exc: BaseException, code: Errors) -> None:
    assert log_dir_code_for(exc) is code
