"""Domain exceptions → Kafka error codes: the one place an exception becomes a code.

The layers below the server raise exceptions of their own domain — storage
(``sluice.broker.log.errors``), topic administration (``sluice.broker.cluster.topic_metadata``),
topic names (``sluice.common.topic_partition``), committed offsets
(``sluice.broker.groups.offset_store``) — and know nothing of Kafka's codes (see
``sluice.broker.protocol.errors`` for why). A handler that catches one answers with
the function of its API family; the codes are members of the registry,
:class:`~sluice.broker.protocol.errors.Errors`:

* :func:`code_for`: the data and topic-administration APIs (Produce, Fetch, ListOffsets,
  CreateTopics, Metadata's auto-creation, …); the table ``_TABLE``.
* :func:`coordinator_code_for`: the coordinator APIs, which send the client looking for the
  coordinator again rather than fail. A failed write to ``__consumer_offsets`` is answered by
  the rule in ``sluice.broker.groups.commit_failure``: it lives there, below the server,
  because the group coordinator applies it to its own metadata writes too.
* :func:`controller_code_for`: the APIs the controller answers (ElectLeaders,
  Alter/ListPartitionReassignments); ``CONTROLLER_ERRORS`` is what they catch.
* :func:`log_dir_code_for`: DescribeLogDirs and AlterReplicaLogDirs.

The families exist because one failure gets a different answer by API (ZooKeeper unreachable
is REQUEST_TIMED_OUT to CreateTopics, COORDINATOR_NOT_AVAILABLE to FindCoordinator); each
falls back to :func:`code_for`. Order matters in ``_TABLE``: the first class the exception is an
instance of wins, so a specific storage error comes before ``StorageError``. Pure;
thread-safe.
"""

from __future__ import annotations

from sluice.broker.cluster import topic_metadata as tm
from sluice.broker.cluster.partition_admin import NotControllerError
from sluice.broker.groups.commit_failure import commit_failure_code
from sluice.broker.groups.offset_store import OffsetCommitFailedError
from sluice.broker.log import errors as le
from sluice.broker.protocol.errors import Errors
from sluice.common.topic_partition import InvalidTopicError

#: What topic administration (CreateTopics, DeleteTopics, auto-creation) may raise and
#: answer with a code rather than close the connection.
ADMIN_ERRORS: tuple[type[Exception], ...] = (
    tm.TopicError,
    InvalidTopicError,
    le.StorageError,
    OSError,
)

#: What a controller API catches from ``ctx.cluster.partition_admin`` and answers with a code.
CONTROLLER_ERRORS: tuple[type[Exception], ...] = (NotControllerError, TimeoutError)

_TABLE: list[tuple[type[BaseException], Errors]] = [
    (le.OffsetOutOfRangeError, Errors.OFFSET_OUT_OF_RANGE),
    (le.CorruptRecordError, Errors.CORRUPT_MESSAGE),
    (le.InvalidRecordError, Errors.INVALID_RECORD),
    (le.RecordBatchTooLargeError, Errors.MESSAGE_TOO_LARGE),
    (le.OutOfOrderSequenceError, Errors.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (le.InvalidProducerEpochError, Errors.INVALID_PRODUCER_EPOCH),
    (le.UnknownProducerIdError, Errors.UNKNOWN_PRODUCER_ID),
    (le.TransactionCoordinatorFencedError, Errors.TRANSACTION_COORDINATOR_FENCED),
    (InvalidTopicError, Errors.INVALID_TOPIC_EXCEPTION),
    (le.StorageError, Errors.KAFKA_STORAGE_ERROR),
    (tm.TopicExistsError, Errors.TOPIC_ALREADY_EXISTS),
    (tm.UnknownTopicError, Errors.UNKNOWN_TOPIC_OR_PARTITION),
    (tm.InvalidPartitionsError, Errors.INVALID_PARTITIONS),
    (tm.InvalidReplicationFactorError, Errors.INVALID_REPLICATION_FACTOR),
    (tm.InvalidConfigError, Errors.INVALID_CONFIG),
    (tm.InvalidReplicaAssignmentError, Errors.INVALID_REPLICA_ASSIGNMENT),
    (tm.MetadataUnavailableError, Errors.REQUEST_TIMED_OUT),
    (OSError, Errors.KAFKA_STORAGE_ERROR),
]


def code_for(exc: BaseException) -> Errors:
    """The code a data or admin API answers for ``exc``; UNKNOWN_SERVER_ERROR if unmapped."""
    for cls, code in _TABLE:
        if isinstance(exc, cls):
            return code
    return Errors.UNKNOWN_SERVER_ERROR


def coordinator_code_for(exc: BaseException) -> Errors:
    """The code a coordinator API (FindCoordinator, InitProducerId, OffsetCommit) answers for
    ``exc``: the client then looks for the coordinator again rather than fail.

    * ``MetadataUnavailableError`` (ZooKeeper unreachable): COORDINATOR_NOT_AVAILABLE.
    * ``OffsetCommitFailedError`` (the commit was not made durable): NOT_COORDINATOR if the
      offsets partition's leadership moved away, else COORDINATOR_NOT_AVAILABLE (e.g. the ISR
      is too small or replication timed out; the same coordinator may take the retry).
    """
    if isinstance(exc, OffsetCommitFailedError):
        return commit_failure_code(exc)
    if isinstance(exc, tm.MetadataUnavailableError):
        return Errors.COORDINATOR_NOT_AVAILABLE
    return code_for(exc)


def controller_code_for(exc: BaseException) -> Errors:
    """The code a controller API (ElectLeaders, AlterPartitionReassignments,
    ListPartitionReassignments) answers for ``exc``.

    * ``NotControllerError``: NOT_CONTROLLER; the client asks the controller again.
    * ``TimeoutError`` (the controller did not finish within the request's timeout):
      REQUEST_TIMED_OUT. Checked before :func:`code_for`, whose ``OSError`` row would call it
      a storage error (``TimeoutError`` is an ``OSError``).
    """
    if isinstance(exc, NotControllerError):
        return Errors.NOT_CONTROLLER
    if isinstance(exc, TimeoutError):
        return Errors.REQUEST_TIMED_OUT
    return code_for(exc)


def log_dir_code_for(exc: BaseException) -> Errors:
    """The code DescribeLogDirs and AlterReplicaLogDirs answer for ``exc``.

    * ``KeyError`` from ``LogManager.start_move`` (the partition's log was deleted meanwhile):
      REPLICA_NOT_AVAILABLE.
    * Any ``StorageError`` or ``OSError`` (a dir whose usage cannot be read, a move that could
      not start): KAFKA_STORAGE_ERROR, Kafka's code for a storage failure there — not the
      specific code :func:`code_for` gives some storage errors on the data path.
    """
    if isinstance(exc, KeyError):
        return Errors.REPLICA_NOT_AVAILABLE
    if isinstance(exc, le.StorageError | OSError):
        return Errors.KAFKA_STORAGE_ERROR
    return code_for(exc)
