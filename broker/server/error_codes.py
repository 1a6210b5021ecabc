"""Storage and metadata exceptions → Kafka error codes (one table, used by every handler)."""

from __future__ import annotations

from sluice.broker.cluster import topic_metadata as tm
from sluice.broker.log import errors as le
from sluice.common.topic_partition import InvalidTopicError

NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
MESSAGE_TOO_LARGE = 10
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUIRED_ACKS = 21
INVALID_GROUP_ID = 24
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40
INVALID_REQUEST = 42
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
KAFKA_STORAGE_ERROR = 56
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
UNKNOWN_PRODUCER_ID = 59
INVALID_RECORD = 87
UNKNOWN_SERVER_ERROR = -1

_TABLE: list[tuple[type[BaseException], int]] = [
    (le.OffsetOutOfRangeError, OFFSET_OUT_OF_RANGE),
    (le.CorruptRecordError, CORRUPT_MESSAGE),
    (le.InvalidRecordError, INVALID_RECORD),
    (le.RecordBatchTooLargeError, MESSAGE_TOO_LARGE),
    (le.OutOfOrderSequenceError, OUT_OF_ORDER_SEQUENCE_NUMBER),
    (le.InvalidProducerEpochError, INVALID_PRODUCER_EPOCH),
    (le.UnknownProducerIdError, UNKNOWN_PRODUCER_ID),
    (InvalidTopicError, INVALID_TOPIC_EXCEPTION),
    (le.StorageError, KAFKA_STORAGE_ERROR),
    (tm.TopicExistsError, TOPIC_ALREADY_EXISTS),
    (tm.UnknownTopicError, UNKNOWN_TOPIC_OR_PARTITION),
    (tm.InvalidPartitionsError, INVALID_PARTITIONS),
    (tm.InvalidReplicationFactorError, INVALID_REPLICATION_FACTOR),
    (tm.InvalidConfigError, INVALID_CONFIG),
    (tm.MetadataUnavailableError, REQUEST_TIMED_OUT),
    (OSError, KAFKA_STORAGE_ERROR),
]


def code_for(exc: BaseException) -> int:
    for cls, code in _TABLE:
        if isinstance(exc, cls):
            return code
    return UNKNOWN_SERVER_ERROR
