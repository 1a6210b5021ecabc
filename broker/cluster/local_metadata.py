"""``LocalMetadataStore``: standalone mode's metadata, kept in the first log dir.

Files (JSON, each rewritten atomically: temp file, fsync, rename, directory fsync)::

    <first log dir>/meta.properties         version=0, broker.id, cluster.id (Kafka's file)
    <first log dir>/sluice-topics.json      {"version": 1,
                                             "topics": {name: {"partitions", "replication_factor",
                                                               "config", "topic_id", "internal"}},
                                             "producer_id_block_end": 2000}

Producer ids are handed out from blocks of 1000 (like Kafka's ProducerIdManager): the end of
the current block is persisted before any id in it is used, so a restart never hands out an id
twice. Thread-safe: one lock around every read-modify-write.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import uuid
from pathlib import Path
from typing import Any

from sluice.broker.cluster.topic_metadata import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    TopicExistsError,
    TopicInfo,
    UnknownTopicError,
)
from sluice.common.atomic_file import write_atomically
from sluice.common.properties import parse_properties
from sluice.common.topic_partition import validate_topic

TOPICS_FILE = "sluice-topics.json"
META_FILE = "meta.properties"
PRODUCER_ID_BLOCK = 1000


class LocalMetadataStore:
    def __init__(self, directory: str | Path, broker_id: int) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.cluster_id = self._load_meta(broker_id)
        self._topics: dict[str, TopicInfo] = {}
        self._block_end = 0
        self._next_pid = 0
        self._load_topics()

    def _load_meta(self, broker_id: int) -> str:
        path = self.directory / META_FILE
        if path.exists():
            meta = parse_properties(path.read_text(encoding="utf-8"))
            if int(meta.get("broker.id", broker_id)) != broker_id:
                raise ValueError(
                    f"{path}: expected broker.id={broker_id} (from the config), found "
                    f"{meta.get('broker.id')}: this log dir belongs to another broker"
                )
            return meta["cluster.id"]
        cluster_id = uuid.uuid4().hex[:22]
        write_atomically(path, f"version=0\nbroker.id={broker_id}\ncluster.id={cluster_id}\n")
        return cluster_id

    def _load_topics(self) -> None:
        path = self.directory / TOPICS_FILE
        if not path.exists():
            return
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("version") != 1:
            raise ValueError(f"{path}: expected version 1, found {doc.get('version')!r}")
        for name, t in doc["topics"].items():
            self._topics[name] = TopicInfo(
                name=name,
                partitions=int(t["partitions"]),
                replication_factor=int(t.get("replication_factor", 1)),
                config=dict(t.get("config", {})),
                topic_id=uuid.UUID(t["topic_id"]),
                internal=bool(t.get("internal", False)),
            )
        self._block_end = int(doc.get("producer_id_block_end", 0))
        self._next_pid = self._block_end  # ids below were possibly handed out

    def _save(self) -> None:
        doc: dict[str, Any] = {
            "version": 1,
            "topics": {
                t.name: {
                    "partitions": t.partitions,
                    "replication_factor": t.replication_factor,
                    "config": t.config,
                    "topic_id": str(t.topic_id),
                    "internal": t.internal,
                }
                for t in self._topics.values()
            },
            "producer_id_block_end": self._block_end,
        }
        write_atomically(self.directory / TOPICS_FILE, json.dumps(doc, indent=1, sort_keys=True))

    def topics(self) -> dict[str, TopicInfo]:
        with self._lock:
            return dict(self._topics)

    def get(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        config: dict[str, str],
        *,
        internal: bool = False,
        validate_only: bool = False,
    ) -> TopicInfo:
        validate_topic(name)
        if partitions < 1:
            raise InvalidPartitionsError(f"expected at least 1 partition, found {partitions}")
        if replication_factor != 1:
            raise InvalidReplicationFactorError(
                f"a standalone broker holds one replica: expected replication factor 1, "
                f"found {replication_factor}"
            )
        with self._lock:
            if name in self._topics:
                raise TopicExistsError(f"topic {name!r} already exists")
            # Kafka refuses names that collide once '.' and '_' are treated alike.
            collides = [t for t in self._topics if t.replace(".", "_") == name.replace(".", "_")]
            if collides:
                raise TopicExistsError(f"topic {name!r} collides with existing {collides[0]!r}")
            info = TopicInfo(name, partitions, replication_factor, dict(config), internal=internal)
            if not validate_only:
                self._topics[name] = info
                self._save()
            return info

    def delete_topic(self, name: str) -> TopicInfo:
        with self._lock:
            info = self._topics.pop(name, None)
            if info is None:
                raise UnknownTopicError(f"topic {name!r} does not exist")
            self._save()
            return info

    def alter_topic_config(self, name: str, config: dict[str, str]) -> TopicInfo:
        """Replace the topic's config overrides (``UnknownTopicError`` if there is no topic)."""
        with self._lock:
            info = self._topics.get(name)
            if info is None:
                raise UnknownTopicError(f"topic {name!r} does not exist")
            info = dataclasses.replace(info, config=dict(config))
            self._topics[name] = info
            self._save()
            return info

    def add_partitions(self, name: str, total: int, *, validate_only: bool = False) -> TopicInfo:
        """Grow the topic to ``total`` partitions (``InvalidPartitionsError`` unless more than
        it has: Kafka never removes partitions)."""
        with self._lock:
            info = self._topics.get(name)
            if info is None:
                raise UnknownTopicError(f"topic {name!r} does not exist")
            if total <= info.partitions:
                raise InvalidPartitionsError(
                    f"Topic currently has {info.partitions} partitions, which is higher than or "
                    f"equal to the requested {total}."
                )
            info = dataclasses.replace(info, partitions=total)
            if not validate_only:
                self._topics[name] = info
                self._save()
            return info

    def next_producer_id(self) -> int:
        with self._lock:
            if self._next_pid >= self._block_end:
                self._block_end = self._next_pid + PRODUCER_ID_BLOCK
                self._save()
            pid = self._next_pid
            self._next_pid += 1
            return pid
