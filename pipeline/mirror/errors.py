"""The mirror's failures: one exception per way a mirror loop cannot go on, and which Kafka
errors are passing trouble instead.

Each is a :class:`MirrorError`; a loop that raises one stops, commits nothing more, and makes
the mirror process exit 1 (``sluice.pipeline.mirror.mirror``). Passing trouble — a retriable
admin error, a target that refuses one config — is logged and retried at the next refresh or
sync instead, never raised.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError

__all__ = [
    "RETRIABLE_CODES",
    "CommitError",
    "DeliveryError",
    "MirrorError",
    "MirrorFencedError",
    "MirrorOffsetsError",
    "TopicConfigSyncError",
    "TopicSetupError",
    "error_of",
    "is_retriable",
    "kafka_codes",
]


class MirrorError(RuntimeError):
    """A mirror loop failed; nothing after its last commit was committed."""


class DeliveryError(MirrorError):
    """The target did not acknowledge a record; its batch was not committed."""


class CommitError(MirrorError):
    """The source cluster did not accept a commit within ``commit.timeout.ms``."""


class MirrorFencedError(MirrorError):
    """Exactly-once mode: a newer mirror with the same ``transactional.id`` (the same
    ``group.id`` and source alias) started, and the target fenced this one (PRODUCER_FENCED);
    its open transaction was aborted. Not to be restarted while the newer one runs."""


class MirrorOffsetsError(MirrorError):
    """Exactly-once mode: the target offsets topic (``mm2-offsets.<alias>.internal``) could not
    be created or read, or holds a record of this mirror that is not in the stored layout."""


class TopicSetupError(MirrorError):
    """A target topic could not be created (a non-retriable CreateTopics error, or the source
    topic's configs could not be read for it: a non-retriable DescribeConfigs error)."""


class TopicConfigSyncError(MirrorError):
    """The target cluster does not support IncrementalAlterConfigs, so topic configs cannot be
    synced (``sync.topic.configs.enabled=false`` turns the sync off), as MirrorMaker 2 fails."""


# -- telling passing trouble from failure ------------------------------------------------------


def kafka_codes(*names: str) -> frozenset[int]:
    """The codes of the ``KafkaError`` constants named (those this librdkafka defines)."""
    return frozenset(getattr(KafkaError, n) for n in names if hasattr(KafkaError, n))


# Worth retrying (a coordinator or leader moving, a broker down): librdkafka does not mark
# every one of them retriable.
RETRIABLE_CODES = kafka_codes(
    "_TRANSPORT", "_TIMED_OUT", "_WAIT_COORD", "_ALL_BROKERS_DOWN", "REQUEST_TIMED_OUT",
    "NETWORK_EXCEPTION", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR",
    "COORDINATOR_LOAD_IN_PROGRESS", "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    "LEADER_NOT_AVAILABLE", "NOT_LEADER_FOR_PARTITION", "UNKNOWN_TOPIC_OR_PART",
)  # fmt: skip


def error_of(exc: Exception) -> Any:
    """The ``KafkaError`` a ``KafkaException`` carries, or None."""
    return exc.args[0] if exc.args and hasattr(exc.args[0], "code") else None


def is_retriable(error: Any) -> bool:
    """Whether a ``KafkaError`` (or None: unknown) is passing trouble worth retrying."""
    return error is not None and (bool(error.retriable()) or error.code() in RETRIABLE_CODES)
