"""What every metadata store holds about a topic, and the errors creating one can raise.

Standalone mode keeps topics in the log dirs (``local_metadata``, served to the broker as a
cluster of one by ``single_broker``); cluster mode keeps them in ZooKeeper
(``cluster_metadata``). Both are a ``MetadataStore``, extended by ``cluster_view.ClusterView``,
the interface everything above this package sees.

One exception per failure mode of topic administration; they know nothing of Kafka's error
codes (``sluice.broker.server.error_mapping`` maps each to its code, once).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Protocol


class TopicError(Exception):
    """Base of the topic-administration errors (each maps to one Kafka error code)."""


class TopicExistsError(TopicError):
    pass


class UnknownTopicError(TopicError):
    pass


class InvalidPartitionsError(TopicError):
    pass


class InvalidReplicationFactorError(TopicError):
    pass


class InvalidConfigError(TopicError):
    pass


class InvalidReplicaAssignmentError(TopicError):
    """A replica assignment names a broker twice, an unknown broker, or sizes that differ."""


class MetadataUnavailableError(TopicError):
    """The metadata store cannot be reached now (ZooKeeper down, the session lost); retriable."""


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int
    replication_factor: int = 1
    config: dict[str, str] = field(default_factory=dict)
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)
    internal: bool = False


class MetadataStore(Protocol):
    cluster_id: str

    def topics(self) -> dict[str, TopicInfo]: ...

    def get(self, name: str) -> TopicInfo | None: ...

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        config: dict[str, str],
        *,
        internal: bool = False,
        validate_only: bool = False,
    ) -> TopicInfo: ...

    def delete_topic(self, name: str) -> TopicInfo: ...

    def next_producer_id(self) -> int: ...
