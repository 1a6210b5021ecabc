"""Errors of the Kafka protocol layer: who broke the wire contract, and Kafka's error codes.

1. **Protocol errors** say who broke the wire contract (after h11):

   - ``LocalProtocolError``: *we* misused the codec (encoded a response for the wrong API or
     version, handed the encoder a value out of range). A bug in Sluice; never the peer's fault.
   - ``RemoteProtocolError``: the *peer* sent bytes that are not a Kafka request (bad size
     prefix, truncated or malformed body, absurd array counts). The server closes that one
     connection and nothing else.
   - ``UnsupportedVersion``: a well-formed header naming an API or version Sluice does not
     implement. A subclass of ``RemoteProtocolError`` (the connection is closed, as Kafka does),
     except that an ApiVersions request is answered first: see ``codec.encode_unsupported_version``.

2. **The Kafka error-code registry**, :class:`Errors` (Kafka's ``Errors.java``): one member per
   error code Sluice answers with, each an ``int`` (what a response's ``error_code`` field
   holds) with ``errno``, ``retriable``, ``message`` and ``code`` (kio's ``ErrorCode`` member).
   The numbers and the retriable flags come from kio's ``ErrorCode`` (generated from Kafka's
   ``Errors.java``), so they cannot drift from Kafka's; the messages are ours. ``for_code``
   looks a code up. Every error code in ``sluice.broker`` is written as a member of this enum:
   no module keeps integer constants of its own.

Why the registry holds codes, not one exception class per code (aiokafka's shape): the broker's
failures are raised by the layers that detect them — ``sluice.broker.log.errors`` (storage),
``sluice.broker.cluster.topic_metadata`` (topic administration), ``sluice.common`` (topic
names) — with the fields and messages of their domain (an ``OffsetOutOfRangeError`` carries
the log's start and end). Those layers sit below the wire protocol and are used without it
(tools, benchmarks, the log tests), so they must not import it; and the mapping is
many-to-one (``OSError`` and every ``StorageError`` without a code of its own are both
KAFKA_STORAGE_ERROR). So each failure has one exception, in its domain, and is mapped to its
code once, in ``sluice.broker.server.error_mapping``; the registry only names the codes. A
class per code beside them would define every domain name a second time (it did:
``OffsetOutOfRangeError``, ``InvalidPartitionsError``, … existed twice) and be raised nowhere.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, ClassVar

from kio.schema.errors import ErrorCode

__all__ = [
    "Errors",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
    "UnsupportedVersion",
    "for_code",
    "registered_codes",
]


# --------------------------------------------------------------------------------------------
# The error-code registry
# --------------------------------------------------------------------------------------------


@enum.unique
class Errors(enum.IntEnum):
    """Kafka's error codes, by Kafka's constant names (``Errors.NOT_LEADER_OR_FOLLOWER``).

    A member is the code itself (an ``int``), so it goes straight into a response's
    ``error_code`` and compares equal to a code read off the wire. ``@enum.unique``: two names
    for one number would make ``for_code`` ambiguous.
    """

    code: ErrorCode
    message: str

    # Hidden from the type checker (as kio hides ErrorCode's): mypy would otherwise take it
    # for the signature of ``Errors(code)``, the lookup by number.
    if not TYPE_CHECKING:

        def __new__(cls, code: ErrorCode, message: str) -> Errors:
            member = int.__new__(cls, int(code))
            member._value_ = int(code)
            member.code = code
            member.message = message
            return member

    @property
    def errno(self) -> int:
        """The code as a plain ``int``."""
        return int(self)

    @property
    def retriable(self) -> bool:
        """Whether a client may retry the same request (Kafka's ``RetriableException``)."""
        return self.code.retriable

    # One member per error code Sluice uses, in code order. Messages follow Kafka's Errors.java.
    UNKNOWN_SERVER_ERROR = (
        ErrorCode.unknown_server_error,
        "The server experienced an unexpected error when processing the request.",
    )
    NONE = ErrorCode.none, "No error."
    OFFSET_OUT_OF_RANGE = (
        ErrorCode.offset_out_of_range,
        "The requested offset is not within the range of offsets maintained by the server.",
    )
    CORRUPT_MESSAGE = (
        ErrorCode.corrupt_message,
        "This message has failed its CRC checksum, exceeds the valid size, or is corrupt.",
    )
    UNKNOWN_TOPIC_OR_PARTITION = (
        ErrorCode.unknown_topic_or_partition,
        "This server does not host this topic-partition.",
    )
    INVALID_FETCH_SIZE = ErrorCode.invalid_fetch_size, "The requested fetch size is invalid."
    LEADER_NOT_AVAILABLE = (
        ErrorCode.leader_not_available,
        "There is no leader for this topic-partition: a leadership election is underway.",
    )
    NOT_LEADER_OR_FOLLOWER = (
        ErrorCode.not_leader_or_follower,
        "This broker is not the leader (or a replica) of this topic-partition.",
    )
    REQUEST_TIMED_OUT = ErrorCode.request_timed_out, "The request timed out."
    BROKER_NOT_AVAILABLE = ErrorCode.broker_not_available, "The broker is not available."
    REPLICA_NOT_AVAILABLE = (
        ErrorCode.replica_not_available,
        "The replica is not available for the requested topic-partition.",
    )
    MESSAGE_TOO_LARGE = (
        ErrorCode.message_too_large,
        "The request included a message larger than the max message size the server accepts.",
    )
    OFFSET_METADATA_TOO_LARGE = (
        ErrorCode.offset_metadata_too_large,
        "The metadata field of the offset request was too large.",
    )
    COORDINATOR_LOAD_IN_PROGRESS = (
        ErrorCode.coordinator_load_in_progress,
        "The coordinator is loading and hence can't process requests.",
    )
    COORDINATOR_NOT_AVAILABLE = (
        ErrorCode.coordinator_not_available,
        "The coordinator is not available.",
    )
    NOT_COORDINATOR = ErrorCode.not_coordinator, "This is not the correct coordinator."
    INVALID_TOPIC_EXCEPTION = (
        ErrorCode.invalid_topic_exception,
        "The request attempted to perform an operation on an invalid topic.",
    )
    RECORD_LIST_TOO_LARGE = (
        ErrorCode.record_list_too_large,
        "The request included a message batch larger than the configured segment size.",
    )
    NOT_ENOUGH_REPLICAS = (
        ErrorCode.not_enough_replicas,
        "Messages are rejected since there are fewer in-sync replicas than required.",
    )
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = (
        ErrorCode.not_enough_replicas_after_append,
        "Messages are written to the log, but to fewer in-sync replicas than required.",
    )
    INVALID_REQUIRED_ACKS = (
        ErrorCode.invalid_required_acks,
        "Produce request specified an invalid value for required acks.",
    )
    ILLEGAL_GENERATION = ErrorCode.illegal_generation, "Specified group generation id is not valid."
    INCONSISTENT_GROUP_PROTOCOL = (
        ErrorCode.inconsistent_group_protocol,
        "The group member's supported protocols are incompatible with the group's.",
    )
    INVALID_GROUP_ID = ErrorCode.invalid_group_id, "The group id is invalid."
    UNKNOWN_MEMBER_ID = ErrorCode.unknown_member_id, "The coordinator is not aware of this member."
    INVALID_SESSION_TIMEOUT = (
        ErrorCode.invalid_session_timeout,
        "The session timeout is not within the range allowed by the broker.",
    )
    REBALANCE_IN_PROGRESS = (
        ErrorCode.rebalance_in_progress,
        "The group is rebalancing, so a rejoin is needed.",
    )
    INVALID_COMMIT_OFFSET_SIZE = (
        ErrorCode.invalid_commit_offset_size,
        "The committing offset data size is not valid.",
    )
    TOPIC_AUTHORIZATION_FAILED = ErrorCode.topic_authorization_failed, "Topic authorization failed."
    GROUP_AUTHORIZATION_FAILED = ErrorCode.group_authorization_failed, "Group authorization failed."
    INVALID_TIMESTAMP = (
        ErrorCode.invalid_timestamp,
        "The timestamp of the message is out of acceptable range.",
    )
    UNSUPPORTED_VERSION = ErrorCode.unsupported_version, "The version of API is not supported."
    TOPIC_ALREADY_EXISTS = ErrorCode.topic_already_exists, "Topic with this name already exists."
    INVALID_PARTITIONS = ErrorCode.invalid_partitions, "Number of partitions is below 1."
    INVALID_REPLICATION_FACTOR = (
        ErrorCode.invalid_replication_factor,
        "Replication factor is below 1 or larger than the number of available brokers.",
    )
    INVALID_REPLICA_ASSIGNMENT = (
        ErrorCode.invalid_replica_assignment,
        "Replica assignment is invalid.",
    )
    INVALID_CONFIG = ErrorCode.invalid_config, "Configuration is invalid."
    NOT_CONTROLLER = (
        ErrorCode.not_controller,
        "This is not the correct controller for this cluster.",
    )
    INVALID_REQUEST = (
        ErrorCode.invalid_request,
        "The request is malformed or was sent to an incompatible broker.",
    )
    UNSUPPORTED_FOR_MESSAGE_FORMAT = (
        ErrorCode.unsupported_for_message_format,
        "The message format version on the broker does not support the request.",
    )
    POLICY_VIOLATION = (
        ErrorCode.policy_violation,
        "Request parameters do not satisfy the configured policy.",
    )
    OUT_OF_ORDER_SEQUENCE_NUMBER = (
        ErrorCode.out_of_order_sequence_number,
        "The broker received an out of order sequence number.",
    )
    DUPLICATE_SEQUENCE_NUMBER = (
        ErrorCode.duplicate_sequence_number,
        "The broker received a duplicate sequence number.",
    )
    INVALID_PRODUCER_EPOCH = (
        ErrorCode.invalid_producer_epoch,
        "Producer attempted to produce with an old epoch.",
    )
    INVALID_TXN_STATE = (
        ErrorCode.invalid_txn_state,
        "The producer attempted a transactional operation in an invalid state.",
    )
    INVALID_PRODUCER_ID_MAPPING = (
        ErrorCode.invalid_producer_id_mapping,
        "The producer attempted to use a producer id which is not currently assigned to its "
        "transactional id.",
    )
    INVALID_TRANSACTION_TIMEOUT = (
        ErrorCode.invalid_transaction_timeout,
        "The transaction timeout is larger than the maximum value allowed by the broker "
        "(as configured by transaction.max.timeout.ms).",
    )
    CONCURRENT_TRANSACTIONS = (
        ErrorCode.concurrent_transactions,
        "The producer attempted to update a transaction while another is in progress.",
    )
    OPERATION_NOT_ATTEMPTED = (
        ErrorCode.operation_not_attempted,
        "The broker did not attempt to execute this operation: another part of the batch failed.",
    )
    KAFKA_STORAGE_ERROR = (
        ErrorCode.kafka_storage_error,
        "Disk error when trying to access log file on the disk.",
    )
    UNKNOWN_PRODUCER_ID = (
        ErrorCode.unknown_producer_id,
        "The broker could not locate the producer metadata for this producer id.",
    )
    NON_EMPTY_GROUP = ErrorCode.non_empty_group, "The group is not empty."
    GROUP_ID_NOT_FOUND = ErrorCode.group_id_not_found, "The group id does not exist."
    FETCH_SESSION_ID_NOT_FOUND = (
        ErrorCode.fetch_session_id_not_found,
        "The fetch session ID was not found.",
    )
    INVALID_FETCH_SESSION_EPOCH = (
        ErrorCode.invalid_fetch_session_epoch,
        "The fetch session epoch is invalid.",
    )
    TOPIC_DELETION_DISABLED = ErrorCode.topic_deletion_disabled, "Topic deletion is disabled."
    FENCED_LEADER_EPOCH = (
        ErrorCode.fenced_leader_epoch,
        "The leader epoch in the request is older than the epoch on the broker.",
    )
    UNKNOWN_LEADER_EPOCH = (
        ErrorCode.unknown_leader_epoch,
        "The leader epoch in the request is newer than the epoch on the broker.",
    )
    UNSUPPORTED_COMPRESSION_TYPE = (
        ErrorCode.unsupported_compression_type,
        "The requesting client does not support the compression type of given partition.",
    )
    OFFSET_NOT_AVAILABLE = (
        ErrorCode.offset_not_available,
        "The leader high watermark has not caught up from a recent leader election.",
    )
    MEMBER_ID_REQUIRED = (
        ErrorCode.member_id_required,
        "The group member needs to have a valid member id before entering a group.",
    )
    GROUP_MAX_SIZE_REACHED = (
        ErrorCode.group_max_size_reached,
        "The consumer group has reached its max size.",
    )
    FENCED_INSTANCE_ID = (
        ErrorCode.fenced_instance_id,
        "Another member with the same group.instance.id is registered.",
    )
    INVALID_RECORD = (
        ErrorCode.invalid_record,
        "This record has failed the validation on broker and hence will be rejected.",
    )
    UNSTABLE_OFFSET_COMMIT = (
        ErrorCode.unstable_offset_commit,
        "There are unstable offsets that need to be cleared.",
    )
    UNKNOWN_TOPIC_ID = ErrorCode.unknown_topic_id, "This server does not host this topic ID."
    LOG_DIR_NOT_FOUND = (
        ErrorCode.log_dir_not_found,
        "The user-specified log directory is not found in the broker config.",
    )
    REASSIGNMENT_IN_PROGRESS = (
        ErrorCode.reassignment_in_progress,
        "A partition reassignment is in progress.",
    )
    PREFERRED_LEADER_NOT_AVAILABLE = (
        ErrorCode.preferred_leader_not_available,
        "The preferred leader was not available.",
    )
    ELIGIBLE_LEADERS_NOT_AVAILABLE = (
        ErrorCode.eligible_leaders_not_available,
        "Eligible topic partition leaders are not available.",
    )
    ELECTION_NOT_NEEDED = (
        ErrorCode.election_not_needed,
        "Leader election not needed for topic partition.",
    )
    NO_REASSIGNMENT_IN_PROGRESS = (
        ErrorCode.no_reassignment_in_progress,
        "No partition reassignment is in progress.",
    )
    GROUP_SUBSCRIBED_TO_TOPIC = (
        ErrorCode.group_subscribed_to_topic,
        "Deleting offsets of a topic is forbidden while the consumer group is subscribed to it.",
    )
    PRODUCER_FENCED = (
        ErrorCode.producer_fenced,
        "There is a newer producer with the same transactional id which fences the current one.",
    )
    # SASL and SCRAM credentials (issue 19), Kafka's messages.
    UNSUPPORTED_SASL_MECHANISM = (
        ErrorCode.unsupported_sasl_mechanism,
        "The broker does not support the requested SASL mechanism.",
    )
    ILLEGAL_SASL_STATE = (
        ErrorCode.illegal_sasl_state,
        "Request is not valid given the current SASL state.",
    )
    SASL_AUTHENTICATION_FAILED = ErrorCode.sasl_authentication_failed, "SASL Authentication failed."
    RESOURCE_NOT_FOUND = (
        ErrorCode.resource_not_found,
        "A request illegally referred to a resource that does not exist.",
    )
    DUPLICATE_RESOURCE = (
        ErrorCode.duplicate_resource,
        "A request illegally referred to the same resource twice.",
    )
    UNACCEPTABLE_CREDENTIAL = (
        ErrorCode.unacceptable_credential,
        "Requested credential would not meet criteria for acceptability.",
    )
    # Authorization (ACLs) and transaction fencing (issues 18 and 19), Kafka's messages.
    CLUSTER_AUTHORIZATION_FAILED = (
        ErrorCode.cluster_authorization_failed,
        "Cluster authorization failed.",
    )
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = (
        ErrorCode.transactional_id_authorization_failed,
        "Transactional Id authorization failed.",
    )
    SECURITY_DISABLED = ErrorCode.security_disabled, "Security features are disabled."
    TRANSACTION_COORDINATOR_FENCED = (
        ErrorCode.transaction_coordinator_fenced,
        "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the "
        "current coordinator for a given producer.",
    )
    INVALID_PRINCIPAL_TYPE = (
        ErrorCode.invalid_principal_type,
        "Request principal deserialization failed during forwarding.",
    )
    # The consumer group protocol (KIP-848).
    FENCED_MEMBER_EPOCH = (
        ErrorCode.fenced_member_epoch,
        "The member epoch is fenced by the group coordinator. The member must abandon all its "
        "partitions and rejoin.",
    )
    UNRELEASED_INSTANCE_ID = (
        ErrorCode.unreleased_instance_id,
        "The instance ID is still used by another member in the consumer group. That member "
        "must leave first.",
    )
    UNSUPPORTED_ASSIGNOR = (
        ErrorCode.unsupported_assignor,
        "The assignor or its version range is not supported by the consumer group.",
    )
    STALE_MEMBER_EPOCH = (
        ErrorCode.stale_member_epoch,
        "The member epoch is stale. The member must retry after receiving its updated member "
        "epoch via the ConsumerGroupHeartbeat API.",
    )
    INVALID_REGULAR_EXPRESSION = (
        ErrorCode.invalid_regular_expression,
        "The regular expression is not valid.",
    )


def for_code(code: int) -> Errors:
    """The member for ``code``; ``UNKNOWN_SERVER_ERROR`` for one the registry does not list
    (as aiokafka's ``for_code`` falls back to its ``UnknownError``)."""
    try:
        return Errors(code)
    except ValueError:
        return Errors.UNKNOWN_SERVER_ERROR


def registered_codes() -> dict[int, Errors]:
    """The registry, code → member."""
    return {int(member): member for member in Errors}


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

    errno: ClassVar[Errors] = Errors.UNSUPPORTED_VERSION

    def __init__(self, api_key: int, api_version: int, correlation_id: int, message: str) -> None:
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
