"""``TopicAdmin``: topic creation and deletion with the broker's own limits, and each topic's
log settings (the broker's defaults with the topic's overrides).

Handlers reach it as ``ctx.topics`` (CreateTopics, DeleteTopics, Metadata's auto-creation);
the log manager and the replica manager ask :meth:`TopicAdmin.log_config` for a partition's
settings. The limits a request must pass before the cluster view registers anything:

* a config the log settings accept (every Kafka topic key is stored; the log applies the ones
  it models);
* enough file descriptors left for the new logs (``file_descriptors``): Kafka sets no limit
  on a topic's partitions, and neither does Sluice, but one int32 in a CreateTopics request
  must not make this broker try to create 2^31 - 1 partitions.

Thread-safety: :meth:`create` and :meth:`delete` may block on ZooKeeper — handlers call them
through ``ctx.off_loop`` (standalone inline, on the event loop: they only touch local files);
:meth:`log_config` only reads the cluster view and is safe from any thread.
"""

from __future__ import annotations

from collections.abc import Sequence

from sluice.broker.cluster.cluster_view import ClusterView
from sluice.broker.cluster.topic_config import log_settings
from sluice.broker.cluster.topic_metadata import InvalidConfigError, TopicInfo
from sluice.broker.log.log_config import LogConfig
from sluice.broker.server.file_descriptors import check_file_descriptors

#: No longer a limit (Kafka has none, and CreateTopics takes any count the file descriptors
#: allow); kept only because ``bench.bench_cluster`` still spreads its partitions over topics
#: of this size. Remove it once the benchmark creates one topic per partition count.
MAX_PARTITIONS_PER_TOPIC = 1000


class TopicAdmin:
    """Topic administration over the cluster view. See the module docstring."""

    def __init__(self, defaults: LogConfig, cluster: ClusterView) -> None:
        self._defaults = defaults
        self._cluster = cluster

    def log_config(self, topic: str) -> LogConfig:
        """The broker's log settings with the topic's overrides. In cluster mode, logs loaded
        before joining get the broker defaults (the view is still empty); the replica manager
        applies the topic's overrides when it takes the partition on."""
        info = self._cluster.get(topic)
        return log_settings(self._defaults, info.config) if info else self._defaults

    def create(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        config: dict[str, str],
        *,
        validate_only: bool = False,
        assignment: Sequence[Sequence[int]] | None = None,
    ) -> TopicInfo:
        """Register a topic; the replicas create its partitions' logs (standalone, before this
        returns). ``assignment``: each partition's replicas, as CreateTopics may give them.

        Raises the cluster view's ``TopicError`` subclasses and ``InvalidTopicError``;
        ``InvalidPartitionsError`` beyond the file descriptors left; ``InvalidConfigError``
        for a config the log settings refuse. Standalone, if a log cannot be created
        (``OSError``, ``StorageError``) the topic is removed again before the error
        propagates, so that it is not left registered with partitions that have no log.
        """
        try:
            log_settings(self._defaults, config)  # every Kafka topic key; the log's applied
        except ValueError as exc:
            raise InvalidConfigError(str(exc)) from None
        check_file_descriptors(partitions)
        return self._cluster.create_topic(
            name, partitions, replication_factor, config,
            validate_only=validate_only, assignment=assignment,
        )  # fmt: skip

    def delete(self, name: str) -> None:
        """Delete a topic (``UnknownTopicError`` if there is none); each replica deletes its
        log when the topic is gone (standalone, before this returns)."""
        self._cluster.delete_topic(name)
