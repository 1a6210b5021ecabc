"""The Kafka error-code registry (``Errors``) and the protocol error hierarchy."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from sluice.broker.protocol import errors
from sluice.broker.protocol.apis import response_type
from sluice.broker.protocol.build import build
from sluice.broker.protocol.errors import (
    Errors,
    LocalProtocolError,
    RemoteProtocolError,
    UnsupportedVersion,
    for_code,
)

# The codes the brief lists as used by Sluice: every one must be registered, under Kafka's name.
REQUIRED = {
    -1: "UNKNOWN_SERVER_ERROR",
    0: "NONE",
    1: "OFFSET_OUT_OF_RANGE",
    2: "CORRUPT_MESSAGE",
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    4: "INVALID_FETCH_SIZE",
    5: "LEADER_NOT_AVAILABLE",
    6: "NOT_LEADER_OR_FOLLOWER",
    7: "REQUEST_TIMED_OUT",
    10: "MESSAGE_TOO_LARGE",
    14: "COORDINATOR_LOAD_IN_PROGRESS",
    15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR",
    17: "INVALID_TOPIC_EXCEPTION",
    18: "RECORD_LIST_TOO_LARGE",
    19: "NOT_ENOUGH_REPLICAS",
    20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    21: "INVALID_REQUIRED_ACKS",
    22: "ILLEGAL_GENERATION",
    23: "INCONSISTENT_GROUP_PROTOCOL",
    24: "INVALID_GROUP_ID",
    25: "UNKNOWN_MEMBER_ID",
    26: "INVALID_SESSION_TIMEOUT",
    27: "REBALANCE_IN_PROGRESS",
    28: "INVALID_COMMIT_OFFSET_SIZE",
    32: "INVALID_TIMESTAMP",
    35: "UNSUPPORTED_VERSION",
    36: "TOPIC_ALREADY_EXISTS",
    37: "INVALID_PARTITIONS",
    38: "INVALID_REPLICATION_FACTOR",
    42: "INVALID_REQUEST",
    43: "UNSUPPORTED_FOR_MESSAGE_FORMAT",
    45: "OUT_OF_ORDER_SEQUENCE_NUMBER",
    46: "DUPLICATE_SEQUENCE_NUMBER",
    47: "INVALID_PRODUCER_EPOCH",
    56: "KAFKA_STORAGE_ERROR",
    59: "UNKNOWN_PRODUCER_ID",
    69: "GROUP_ID_NOT_FOUND",
    74: "FENCED_LEADER_EPOCH",
    75: "UNKNOWN_LEADER_EPOCH",
    79: "MEMBER_ID_REQUIRED",
    100: "UNKNOWN_TOPIC_ID",
}


@pytest.mark.parametrize(("code", "name"), sorted(REQUIRED.items()))
def test_lookup_by_code(code: int, name: str) -> None:
    member = for_code(code)
    assert member.name == name
    assert member.errno == code == member
    assert member.code == ErrorCode(code)
    # Numbers and retriable flags are Kafka's, through kio's generated enum.
    assert member.retriable is ErrorCode(code).retriable
    assert member.message


def test_retriable_flags_match_kafka() -> None:
    assert for_code(6).retriable  # NOT_LEADER_OR_FOLLOWER: refresh metadata and retry
    assert for_code(15).retriable
    assert for_code(19).retriable
    assert not for_code(1).retriable  # OFFSET_OUT_OF_RANGE: reset, not retry
    assert not for_code(35).retriable


def test_unknown_code_falls_back_to_unknown_server_error() -> None:
    assert for_code(9999) is Errors.UNKNOWN_SERVER_ERROR


def test_registry_has_no_duplicates_and_is_complete() -> None:
    registry = errors.registered_codes()
    assert set(REQUIRED) <= set(registry)
    assert all(member.errno == code for code, member in registry.items())
    assert len(registry) == len(Errors) == len(Errors.__members__)  # no aliases
    # Every name is kio's (so Kafka's) for that number: a typo cannot pair a name with
    # another code's number.
    assert all(member.name == member.code.name.upper() for member in Errors)


def test_a_member_is_the_code_on_the_wire() -> None:
    code = Errors.NOT_LEADER_OR_FOLLOWER
    assert isinstance(code, int) and code == 6 and code.code is ErrorCode.not_leader_or_follower
    assert f"{code}" == "6"  # as it reads in a log line or message
    body = build(
        response_type(3, 1),
        {
            "brokers": [],
            "controller_id": 0,
            "topics": [{"error_code": code, "name": "t", "is_internal": False, "partitions": []}],
        },
    )
    assert body.topics[0].error_code is ErrorCode.not_leader_or_follower
    assert Errors.REQUEST_TIMED_OUT.message == "The request timed out."


def test_protocol_error_hierarchy() -> None:
    assert not issubclass(LocalProtocolError, RemoteProtocolError)
    assert not issubclass(RemoteProtocolError, LocalProtocolError)
    # An unsupported version is the peer's doing: the connection closes unless it is answered.
    assert issubclass(UnsupportedVersion, RemoteProtocolError)
    exc = UnsupportedVersion(18, 9, 1234, "nope")
    assert (exc.api_key, exc.api_version, exc.correlation_id) == (18, 9, 1234)
    assert exc.errno == 35 and exc.errno is Errors.UNSUPPORTED_VERSION
