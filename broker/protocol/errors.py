"""Errors of the Kafka protocol layer, in two families.

1. **Protocol errors** say who broke the wire contract (after h11):

   - ``LocalProtocolError``: *we* misused the codec (encoded a response for the wrong API or
     version, handed the encoder a value out of range). A bug in Sluice; never the peer's fault.
   - ``RemoteProtocolError``: the *peer* sent bytes that are not a Kafka request (bad size
     prefix, truncated or malformed body, absurd array counts). The server closes that one
     connection and nothing else.
   - ``UnsupportedVersion``: a well-formed header naming an API or version Sluice does not
     implement. A subclass of ``RemoteProtocolError`` (the connection is closed, as Kafka does),
     except that an ApiVersions request is answered first: see ``codec.encode_unsupported_version``.

2. **The Kafka error-code registry**: one exception class per error code, with ``errno``,
   ``retriable`` and a message, looked up with ``for_code``. Handlers raise them; the server maps
   them to the ``error_code`` field of the response through ``exc.errno`` (or ``exc.code``, the
   ``kio`` enum member, which is what kio's response dataclasses expect). The numbers and the
   retriable flags come from kio's ``ErrorCode`` (generated from Kafka's ``Errors.java``), so they
   cannot drift from Kafka's; the classes and messages are ours.
"""

from __future__ import annotations

from typing import ClassVar

from kio.schema.errors import ErrorCode

__all__ = [
    "ProtocolError",
    "LocalProtocolError",
    "RemoteProtocolError",
    "UnsupportedVersion",
    "KafkaError",
    "BrokerResponseError",
    "for_code",
    "registered_codes",
]


# --------------------------------------------------------------------------------------------
# Protocol errors
# --------------------------------------------------------------------------------------------


class ProtocolError(Exception):
    """Base of the errors raised by the codec itself."""


class LocalProtocolError(ProtocolError):
    """We misused the codec: a bug in Sluice, never the peer's doing."""


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes that are not a valid Kafka request; close its connection."""


class UnsupportedVersion(RemoteProtocolError):
    """A request for an API key or version Sluice does not implement.

    Carries what the server needs to answer (ApiVersions) or to log before closing (the rest):
    the correlation id and the requested key and version, read from the fixed-size start of the
    request header, which has the same layout in every header version.
    """

    errno: ClassVar[int] = 35

    def __init__(self, api_key: int, api_version: int, correlation_id: int, message: str) -> None:
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


# --------------------------------------------------------------------------------------------
# The error-code registry
# --------------------------------------------------------------------------------------------


class KafkaError(Exception):
    """Base of every error that maps to a Kafka error code."""


_REGISTRY: dict[int, type[BrokerResponseError]] = {}


class BrokerResponseError(KafkaError):
    """An error with a Kafka error code; subclasses register themselves by ``code``.

    ``raise NotLeaderOrFollowerError()`` uses the class message; pass a string to say more
    (what was expected and what was found).
    """

    code: ClassVar[ErrorCode]
    errno: ClassVar[int]
    retriable: ClassVar[bool]
    message: ClassVar[str]

    def __init_subclass__(cls, code: ErrorCode | None = None, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if code is None:
            return
        if int(code) in _REGISTRY:
            raise TypeError(f"error code {int(code)} registered twice: {cls.__name__}")
        cls.code = code
        cls.errno = int(code)
        cls.retriable = code.retriable
        _REGISTRY[int(code)] = cls

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(detail if detail is not None else self.message)
        self.detail = detail

    def __str__(self) -> str:
        text = self.message if self.detail is None else f"{self.message}: {self.detail}"
        return f"[Error {self.errno}] {type(self).__name__}: {text}"


def for_code(code: int) -> type[BrokerResponseError]:
    """The error class registered for ``code``; ``UnknownServerError`` for one we do not list
    (as aiokafka's ``for_code`` falls back to its ``UnknownError``)."""
    return _REGISTRY.get(code, UnknownServerError)


def registered_codes() -> dict[int, type[BrokerResponseError]]:
    """A copy of the registry, code → class."""
    return dict(_REGISTRY)


# One class per error code Sluice uses, in code order. Messages follow Kafka's Errors.java.


class UnknownServerError(BrokerResponseError, code=ErrorCode.unknown_server_error):
    message = "The server experienced an unexpected error when processing the request."


class NoError(BrokerResponseError, code=ErrorCode.none):
    message = "No error."


class OffsetOutOfRangeError(BrokerResponseError, code=ErrorCode.offset_out_of_range):
    message = "The requested offset is not within the range of offsets maintained by the server."


class CorruptMessageError(BrokerResponseError, code=ErrorCode.corrupt_message):
    message = "This message has failed its CRC checksum, exceeds the valid size, or is corrupt."


class UnknownTopicOrPartitionError(BrokerResponseError, code=ErrorCode.unknown_topic_or_partition):
    message = "This server does not host this topic-partition."


class InvalidFetchSizeError(BrokerResponseError, code=ErrorCode.invalid_fetch_size):
    message = "The requested fetch size is invalid."


class LeaderNotAvailableError(BrokerResponseError, code=ErrorCode.leader_not_available):
    message = "There is no leader for this topic-partition: a leadership election is underway."


class NotLeaderOrFollowerError(BrokerResponseError, code=ErrorCode.not_leader_or_follower):
    message = "This broker is not the leader (or a replica) of this topic-partition."


class RequestTimedOutError(BrokerResponseError, code=ErrorCode.request_timed_out):
    message = "The request timed out."


class BrokerNotAvailableError(BrokerResponseError, code=ErrorCode.broker_not_available):
    message = "The broker is not available."


class ReplicaNotAvailableError(BrokerResponseError, code=ErrorCode.replica_not_available):
    message = "The replica is not available for the requested topic-partition."


class MessageTooLargeError(BrokerResponseError, code=ErrorCode.message_too_large):
    message = "The request included a message larger than the max message size the server accepts."


class OffsetMetadataTooLargeError(BrokerResponseError, code=ErrorCode.offset_metadata_too_large):
    message = "The metadata field of the offset request was too large."


class CoordinatorLoadInProgressError(
    BrokerResponseError, code=ErrorCode.coordinator_load_in_progress
):
    message = "The coordinator is loading and hence can't process requests."


class CoordinatorNotAvailableError(BrokerResponseError, code=ErrorCode.coordinator_not_available):
    message = "The coordinator is not available."


class NotCoordinatorError(BrokerResponseError, code=ErrorCode.not_coordinator):
    message = "This is not the correct coordinator."


class InvalidTopicError(BrokerResponseError, code=ErrorCode.invalid_topic_exception):
    message = "The request attempted to perform an operation on an invalid topic."


class RecordListTooLargeError(BrokerResponseError, code=ErrorCode.record_list_too_large):
    message = "The request included a message batch larger than the configured segment size."


class NotEnoughReplicasError(BrokerResponseError, code=ErrorCode.not_enough_replicas):
    message = "Messages are rejected since there are fewer in-sync replicas than required."


class NotEnoughReplicasAfterAppendError(
    BrokerResponseError, code=ErrorCode.not_enough_replicas_after_append
):
    message = "Messages are written to the log, but to fewer in-sync replicas than required."


class InvalidRequiredAcksError(BrokerResponseError, code=ErrorCode.invalid_required_acks):
    message = "Produce request specified an invalid value for required acks."


class IllegalGenerationError(BrokerResponseError, code=ErrorCode.illegal_generation):
    message = "Specified group generation id is not valid."


class InconsistentGroupProtocolError(
    BrokerResponseError, code=ErrorCode.inconsistent_group_protocol
):
    message = "The group member's supported protocols are incompatible with the group's."


class InvalidGroupIdError(BrokerResponseError, code=ErrorCode.invalid_group_id):
    message = "The group id is invalid."


class UnknownMemberIdError(BrokerResponseError, code=ErrorCode.unknown_member_id):
    message = "The coordinator is not aware of this member."


class InvalidSessionTimeoutError(BrokerResponseError, code=ErrorCode.invalid_session_timeout):
    message = "The session timeout is not within the range allowed by the broker."


class RebalanceInProgressError(BrokerResponseError, code=ErrorCode.rebalance_in_progress):
    message = "The group is rebalancing, so a rejoin is needed."


class InvalidCommitOffsetSizeError(BrokerResponseError, code=ErrorCode.invalid_commit_offset_size):
    message = "The committing offset data size is not valid."


class TopicAuthorizationFailedError(BrokerResponseError, code=ErrorCode.topic_authorization_failed):
    message = "Topic authorization failed."


class GroupAuthorizationFailedError(BrokerResponseError, code=ErrorCode.group_authorization_failed):
    message = "Group authorization failed."


class InvalidTimestampError(BrokerResponseError, code=ErrorCode.invalid_timestamp):
    message = "The timestamp of the message is out of acceptable range."


class UnsupportedVersionError(BrokerResponseError, code=ErrorCode.unsupported_version):
    message = "The version of API is not supported."


class TopicAlreadyExistsError(BrokerResponseError, code=ErrorCode.topic_already_exists):
    message = "Topic with this name already exists."


class InvalidPartitionsError(BrokerResponseError, code=ErrorCode.invalid_partitions):
    message = "Number of partitions is below 1."


class InvalidReplicationFactorError(BrokerResponseError, code=ErrorCode.invalid_replication_factor):
    message = "Replication factor is below 1 or larger than the number of available brokers."


class InvalidReplicaAssignmentError(BrokerResponseError, code=ErrorCode.invalid_replica_assignment):
    message = "Replica assignment is invalid."


class InvalidConfigError(BrokerResponseError, code=ErrorCode.invalid_config):
    message = "Configuration is invalid."


class NotControllerError(BrokerResponseError, code=ErrorCode.not_controller):
    message = "This is not the correct controller for this cluster."


class InvalidRequestError(BrokerResponseError, code=ErrorCode.invalid_request):
    message = "The request is malformed or was sent to an incompatible broker."


class UnsupportedForMessageFormatError(
    BrokerResponseError, code=ErrorCode.unsupported_for_message_format
):
    message = "The message format version on the broker does not support the request."


class PolicyViolationError(BrokerResponseError, code=ErrorCode.policy_violation):
    message = "Request parameters do not satisfy the configured policy."


class OutOfOrderSequenceNumberError(
    BrokerResponseError, code=ErrorCode.out_of_order_sequence_number
):
    message = "The broker received an out of order sequence number."


class DuplicateSequenceNumberError(BrokerResponseError, code=ErrorCode.duplicate_sequence_number):
    message = "The broker received a duplicate sequence number."


class InvalidProducerEpochError(BrokerResponseError, code=ErrorCode.invalid_producer_epoch):
    message = "Producer attempted to produce with an old epoch."


class InvalidTxnStateError(BrokerResponseError, code=ErrorCode.invalid_txn_state):
    message = "The producer attempted a transactional operation in an invalid state."


class ConcurrentTransactionsError(BrokerResponseError, code=ErrorCode.concurrent_transactions):
    message = "The producer attempted to update a transaction while another is in progress."


class KafkaStorageError(BrokerResponseError, code=ErrorCode.kafka_storage_error):
    message = "Disk error when trying to access log file on the disk."


class UnknownProducerIdError(BrokerResponseError, code=ErrorCode.unknown_producer_id):
    message = "The broker could not locate the producer metadata for this producer id."


class NonEmptyGroupError(BrokerResponseError, code=ErrorCode.non_empty_group):
    message = "The group is not empty."


class GroupIdNotFoundError(BrokerResponseError, code=ErrorCode.group_id_not_found):
    message = "The group id does not exist."


class FetchSessionIdNotFoundError(BrokerResponseError, code=ErrorCode.fetch_session_id_not_found):
    message = "The fetch session ID was not found."


class InvalidFetchSessionEpochError(
    BrokerResponseError, code=ErrorCode.invalid_fetch_session_epoch
):
    message = "The fetch session epoch is invalid."


class TopicDeletionDisabledError(BrokerResponseError, code=ErrorCode.topic_deletion_disabled):
    message = "Topic deletion is disabled."


class FencedLeaderEpochError(BrokerResponseError, code=ErrorCode.fenced_leader_epoch):
    message = "The leader epoch in the request is older than the epoch on the broker."


class UnknownLeaderEpochError(BrokerResponseError, code=ErrorCode.unknown_leader_epoch):
    message = "The leader epoch in the request is newer than the epoch on the broker."


class UnsupportedCompressionTypeError(
    BrokerResponseError, code=ErrorCode.unsupported_compression_type
):
    message = "The requesting client does not support the compression type of given partition."


class OffsetNotAvailableError(BrokerResponseError, code=ErrorCode.offset_not_available):
    message = "The leader high watermark has not caught up from a recent leader election."


class MemberIdRequiredError(BrokerResponseError, code=ErrorCode.member_id_required):
    message = "The group member needs to have a valid member id before entering a group."


class GroupMaxSizeReachedError(BrokerResponseError, code=ErrorCode.group_max_size_reached):
    message = "The consumer group has reached its max size."


class FencedInstanceIdError(BrokerResponseError, code=ErrorCode.fenced_instance_id):
    message = "Another member with the same group.instance.id is registered."


class InvalidRecordError(BrokerResponseError, code=ErrorCode.invalid_record):
    message = "This record has failed the validation on broker and hence will be rejected."


class UnstableOffsetCommitError(BrokerResponseError, code=ErrorCode.unstable_offset_commit):
    message = "There are unstable offsets that need to be cleared."


class UnknownTopicIdError(BrokerResponseError, code=ErrorCode.unknown_topic_id):
    message = "This server does not host this topic ID."
