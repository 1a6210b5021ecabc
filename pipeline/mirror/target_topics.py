"""``TargetTopics``: the target topics of one source cluster, kept like the source's.

MirrorMaker 2's ``MirrorSourceConnector`` does this work on its schedule; here one mirror loop
(``sluice.pipeline.mirror.mirror.ClusterMirror``) calls it between batches:

* :meth:`TargetTopics.ensure` at every topic refresh (``refresh.topics.interval.*``), with the
  source topics to mirror and their partition counts (``refreshTopicPartitions`` →
  ``computeAndCreateTopicPartitions``):

  - a topic **missing** on the target is created with the source's partition count,
    ``target.replication.factor`` and the source topic's configs as
    :class:`~sluice.pipeline.mirror.topic_configs.ConfigPropertyFilter` selects them (read
    from the source with DescribeConfigs first: a topic whose configs cannot be read yet is
    not created yet — created without them it would, say, lose ``cleanup.policy=compact``);
  - a topic with **fewer partitions** on the target than on the source is grown to the
    source's count (CreatePartitions), so the mirror keeps copying each record to the
    partition of the same number. A target with *more* partitions is left alone (the mirror
    then hashes keys, as when the counts differ for any other reason);
  - then it waits (≤ 30 s) until the target's Metadata shows what it created or grew.

  TOPIC_ALREADY_EXISTS and INVALID_PARTITIONS mean another mirror process (or loop) was
  quicker and are fine; retriable errors leave the topic as it is until the next refresh; a
  non-retriable CreateTopics or source DescribeConfigs error raises
  :class:`~sluice.pipeline.mirror.errors.TopicSetupError` (nothing of that topic could be
  mirrored). A CreatePartitions refused for good is logged at every refresh: the topic's
  records are key-hashed meanwhile, none is lost.

* :meth:`TargetTopics.sync_configs` every ``sync.topic.configs.interval.seconds`` (when
  ``sync.topic.configs.enabled``), with the topics being mirrored (``syncTopicConfigs``): reads
  both sides' configs (DescribeConfigs) and applies the difference to the target with
  IncrementalAlterConfigs. A target that does not support IncrementalAlterConfigs raises
  :class:`~sluice.pipeline.mirror.errors.TopicConfigSyncError`, as MirrorMaker 2 fails its
  connector; every other error is logged and retried at the next sync.

Several loops mirroring one topic name from different source clusters into one target topic
each sync their own source's configs to it: the last sync wins (MirrorMaker 2 prefixes topics
with the source alias; with its ``IdentityReplicationPolicy`` it behaves the same).

Not thread-safe: used only from its loop's thread (the admin clients are that loop's).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AlterConfigOpType,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from sluice.pipeline.mirror.config import MirrorConfig
from sluice.pipeline.mirror.errors import (
    TopicConfigSyncError,
    TopicSetupError,
    error_of,
    is_retriable,
    kafka_codes,
)

__all__ = ["TargetTopics"]

log = logging.getLogger("sluice.mirror")

METADATA_TIMEOUT_S = 10.0
ADMIN_TIMEOUT_S = 60.0
SETTLE_TIMEOUT_S = 30.0

# The target cannot apply configs incrementally at all (an old broker): syncing is impossible.
_NO_INCREMENTAL_ALTER = kafka_codes("UNSUPPORTED_VERSION", "_UNSUPPORTED_FEATURE")

Configs = dict[str, Any]  # a describe_configs result: config name → ConfigEntry


class TargetTopics:
    """The target side of the loop of source cluster ``alias``; see the module docstring.
    ``counts`` holds the target partition counts of the last Metadata read."""

    def __init__(
        self, config: MirrorConfig, alias: str, source_admin: Any, target_admin: Any
    ) -> None:
        self.config = config
        self.alias = alias
        self.source_admin = source_admin
        self.target_admin = target_admin
        self.counts: dict[str, int] = {}

    # -- topics and partitions ----------------------------------------------------------------

    def ensure(self, wanted: Mapping[str, int]) -> set[str]:
        """The topics of ``wanted`` (name → source partition count) that exist on the target,
        after creating the missing ones and growing those with fewer partitions."""
        try:
            existing = self._target_counts()
        except KafkaException as exc:
            log.warning("%s: target metadata unavailable (will retry): %s", self.alias, exc)
            return {t for t in wanted if t in self.counts}
        missing = sorted(set(wanted) - set(existing))
        smaller = {t: n for t, n in sorted(wanted.items()) if t in existing and existing[t] < n}
        settling: dict[str, int] = {}
        if missing:
            settling.update(self._create(missing, wanted))
        if smaller:
            settling.update(self._grow(smaller, existing))
        if settling:
            existing = self._wait_settled(settling, existing)
        self.counts.update(existing)
        return {t for t in wanted if t in existing}

    def _create(self, topics: list[str], counts: Mapping[str, int]) -> dict[str, int]:
        """Create ``topics`` with their source configs; the ones to wait for."""
        configs = self._source_configs_for_creation(topics)
        if not configs:
            return {}
        rf = self.config.target_replication_factor
        new = {
            t: NewTopic(t, counts[t], rf, config=self.config.config_properties.creation_configs(c))
            for t, c in configs.items()
        }
        futures = self.target_admin.create_topics(list(new.values()), operation_timeout=30)
        settling = {}
        for topic, future in futures.items():
            try:
                future.result(timeout=ADMIN_TIMEOUT_S)
                log.info(
                    "%s: created %s on %s with %d partitions and configs %s",
                    self.alias, topic, self.config.target_alias, counts[topic],
                    _shown(new[topic].config),
                )  # fmt: skip
            except KafkaException as exc:
                error = error_of(exc)
                if error is not None and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    pass  # another mirror process (or loop) was quicker
                elif is_retriable(error):
                    log.warning("%s: creating %s: %s (will retry)", self.alias, topic, exc)
                    continue
                else:
                    raise TopicSetupError(
                        f"{self.alias}: expected to create {topic} on "
                        f"{self.config.target_alias} with {counts[topic]} partitions, "
                        f"replication factor {rf} and configs {_shown(new[topic].config)}, "
                        f"found {exc}"
                    ) from None
            settling[topic] = counts[topic]
        return settling

    def _source_configs_for_creation(self, topics: list[str]) -> dict[str, Configs]:
        configs, errors = _describe(self.source_admin, topics)
        for topic, (error, exc) in sorted(errors.items()):
            if not is_retriable(error):
                raise TopicSetupError(
                    f"{self.alias}: expected the configs of source topic {topic} "
                    f"(DescribeConfigs) to create it on {self.config.target_alias}, found {exc}"
                )
            log.warning(
                "%s: configs of %s unavailable, not created on %s yet (will retry): %s",
                self.alias, topic, self.config.target_alias, exc,
            )  # fmt: skip
        return configs

    def _grow(self, topics: Mapping[str, int], existing: Mapping[str, int]) -> dict[str, int]:
        """CreatePartitions up to the source's counts; the topics to wait for."""
        futures = self.target_admin.create_partitions(
            [NewPartitions(t, n) for t, n in topics.items()], operation_timeout=30
        )
        settling = {}
        for topic, future in futures.items():
            try:
                future.result(timeout=ADMIN_TIMEOUT_S)
                log.info(
                    "%s: grew %s on %s from %d to %d partitions, as on the source",
                    self.alias, topic, self.config.target_alias, existing[topic], topics[topic],
                )  # fmt: skip
            except KafkaException as exc:
                error = error_of(exc)
                if error is not None and error.code() == KafkaError.INVALID_PARTITIONS:
                    pass  # grown meanwhile by another mirror process (or loop)
                else:
                    log.warning(
                        "%s: growing %s on %s to %d partitions: %s (will retry; its records "
                        "are key-hashed meanwhile)",
                        self.alias, topic, self.config.target_alias, topics[topic], exc,
                    )  # fmt: skip
                    continue
            settling[topic] = topics[topic]
        return settling

    def _target_counts(self) -> dict[str, int]:
        metadata = self.target_admin.list_topics(timeout=METADATA_TIMEOUT_S)
        return {
            name: len(t.partitions)
            for name, t in metadata.topics.items()
            if t.error is None and t.partitions
        }

    def _wait_settled(self, settling: Mapping[str, int], known: dict[str, int]) -> dict[str, int]:
        """Target partition counts once Metadata shows ``settling``'s topics with at least
        their counts (≤ 30 s; the next refresh looks again)."""
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while True:
            with contextlib.suppress(KafkaException):
                known = self._target_counts()
            if all(known.get(t, 0) >= n for t, n in settling.items()):
                return known
            if time.monotonic() > deadline:
                return known
            time.sleep(0.1)

    # -- configs -----------------------------------------------------------------------------

    def sync_configs(self, topics: Iterable[str]) -> int:
        """Give each target topic of ``topics`` its source topic's configs; the number of
        topics altered (0 when all were in line)."""
        names = sorted(topics)
        if not names:
            return 0
        source, source_errors = _describe(self.source_admin, names)
        target, target_errors = _describe(self.target_admin, names)
        for side, errors in (("source", source_errors), (self.config.target_alias, target_errors)):
            for topic, (_, exc) in sorted(errors.items()):
                log.warning(
                    "%s: configs of %s on %s unavailable, not synced (will retry): %s",
                    self.alias, topic, side, exc,
                )  # fmt: skip
        resources = {}
        for topic in names:
            if topic not in source or topic not in target:
                continue
            ops = self.config.config_properties.sync_operations(source[topic], target[topic])
            if ops:
                resources[topic] = ConfigResource("topic", topic, incremental_configs=ops)
        if not resources:
            return 0
        futures = self.target_admin.incremental_alter_configs(list(resources.values()))
        altered = 0
        for resource, future in futures.items():
            topic = resource.name
            try:
                future.result(timeout=ADMIN_TIMEOUT_S)
            except KafkaException as exc:
                error = error_of(exc)
                if error is not None and error.code() in _NO_INCREMENTAL_ALTER:
                    raise TopicConfigSyncError(
                        f"{self.alias}: expected {self.config.target_alias} to take topic "
                        f"configs with IncrementalAlterConfigs, found {exc}; set "
                        "sync.topic.configs.enabled=false to mirror without syncing them"
                    ) from None
                log.warning(
                    "%s: syncing the configs of %s on %s: %s (will retry)",
                    self.alias, topic, self.config.target_alias, exc,
                )  # fmt: skip
                continue
            altered += 1
            log.info(
                "%s: synced configs of %s on %s: %s",
                self.alias, topic, self.config.target_alias,
                _shown_ops(resources[topic].incremental_configs),
            )  # fmt: skip
        return altered


def _describe(
    admin: Any, topics: list[str]
) -> tuple[dict[str, Configs], dict[str, tuple[Any, Exception]]]:
    """DescribeConfigs of ``topics``: (topic → configs, topic → (KafkaError or None, the
    exception)) — every topic lands in one of the two."""
    results: dict[str, Configs] = {}
    errors: dict[str, tuple[Any, Exception]] = {}
    try:
        futures = admin.describe_configs([ConfigResource("topic", t) for t in topics])
    except KafkaException as exc:
        return {}, {t: (error_of(exc), exc) for t in topics}
    for resource, future in futures.items():
        try:
            results[resource.name] = future.result(timeout=ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            errors[resource.name] = (error_of(exc), exc)
    return results, errors


def _shown(configs: Mapping[str, str] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted((configs or {}).items())) or "-"


def _shown_ops(ops: Iterable[Any]) -> str:
    return ", ".join(
        f"{e.name} deleted" if e.incremental_operation == AlterConfigOpType.DELETE
        else f"{e.name}={e.value}"
        for e in ops
    )  # fmt: skip
