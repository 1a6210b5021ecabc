"""The Kafka error-code registry and the protocol error hierarchy."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from sluice.broker.protocol import errors
from sluice.broker.protocol.errors import (
    BrokerResponseError,
    LocalProtocolError,
    RemoteProtocolError,
    UnsupportedVersion,
    for_code,
)

# The codes the brief lists as used by Sluice: every one must be registered.
REQUIRED = {
    -1: "UnknownServerError",
    0: "NoError",
    1: "OffsetOutOfRangeError",
    2: "CorruptMessageError",
    3: "UnknownTopicOrPartitionError",
    4: "InvalidFetchSizeError",
    5: "LeaderNotAvailableError",
    6: "NotLeaderOrFollowerError",
    7: "RequestTimedOutError",
    10: "MessageTooLargeError",
    14: "CoordinatorLoadInProgressError",
    15: "CoordinatorNotAvailableError",
    16: "NotCoordinatorError",
    17: "InvalidTopicError",
    18: "RecordListTooLargeError",
    19: "NotEnoughReplicasError",
    20: "NotEnoughReplicasAfterAppendError",
    21: "InvalidRequiredAcksError",
    22: "IllegalGenerationError",
    23: "InconsistentGroupProtocolError",
    24: "InvalidGroupIdError",
    25: "UnknownMemberIdError",
    26: "InvalidSessionTimeoutError",
    27: "RebalanceInProgressError",
    28: "InvalidCommitOffsetSizeError",
    32: "InvalidTimestampError",
    35: "UnsupportedVersionError",
    36: "TopicAlreadyExistsError",
    37: "InvalidPartitionsError",
    38: "InvalidReplicationFactorError",
    42: "InvalidRequestError",
    43: "UnsupportedForMessageFormatError",
    45: "OutOfOrderSequenceNumberError",
    46: "DuplicateSequenceNumberError",
    47: "InvalidProducerEpochError",
    56: "KafkaStorageError",
    59: "UnknownProducerIdError",
    69: "GroupIdNotFoundError",
    74: "FencedLeaderEpochError",
    75: "UnknownLeaderEpochError",
    79: "MemberIdRequiredError",
    100: "UnknownTopicIdError",
}


@pytest.mark.parametrize(("code", "name"), sorted(REQUIRED.items()))
def test_lookup_by_code(code: int, name: str) -> None:
    cls = for_code(code)
    assert cls.__name__ == name
    assert cls.errno == code
    assert cls.code == ErrorCode(code)
    # Numbers and retriable flags are Kafka's, through kio's generated enum.
    assert cls.retriable is ErrorCode(code).retriable
    assert cls.message


def test_retriable_flags_match_kafka() -> None:
    assert for_code(6).retriable  # NOT_LEADER_OR_FOLLOWER: refresh metadata and retry
    assert for_code(15).retriable
    assert for_code(19).retriable
    assert not for_code(1).retriable  # OFFSET_OUT_OF_RANGE: reset, not retry
    assert not for_code(35).retriable


def test_unknown_code_falls_back_to_unknown_server_error() -> None:
    assert for_code(9999) is errors.UnknownServerError


def test_registry_has_no_duplicates_and_is_complete() -> None:
    registry = errors.registered_codes()
    assert set(REQUIRED) <= set(registry)
    assert all(cls.errno == code for code, cls in registry.items())
    with pytest.raises(TypeError, match="registered twice"):

        class Again(BrokerResponseError, code=ErrorCode.offset_out_of_range):
            message = "dup"


def test_raise_and_map_to_code() -> None:
    with pytest.raises(BrokerResponseError) as info:
        raise errors.NotLeaderOrFollowerError("partition t-0 is led by broker 2")
    exc = info.value
    assert exc.errno == 6
    assert exc.code is ErrorCode.not_leader_or_follower
    assert "NotLeaderOrFollowerError" in str(exc)
    assert "broker 2" in str(exc)
    assert str(errors.RequestTimedOutError()).endswith("The request timed out.")


def test_protocol_error_hierarchy() -> None:
    assert not issubclass(LocalProtocolError, RemoteProtocolError)
    assert not issubclass(RemoteProtocolError, LocalProtocolError)
    # An unsupported version is the peer's doing: the connection closes unless it is answered.
    assert issubclass(UnsupportedVersion, RemoteProtocolError)
    exc = UnsupportedVersion(18, 9, 1234, "nope")
    assert (exc.api_key, exc.api_version, exc.correlation_id) == (18, 9, 1234)
    assert exc.errno == 35
