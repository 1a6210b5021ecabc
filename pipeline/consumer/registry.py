"""The ZooKeeper registries of the paper's consumer groups (§3.2), in Kafka 0.8's layout.

One class per znode, each with ``path`` and, where the znode holds data, ``encode``/``decode``
(as Kafka's ``ZkData``). Paths are relative to the client's chroot::

    /consumers/<group>/ids/<consumer id>      EPHEMERAL consumer registry:
                                              {"version": 1, "subscription": {"<topic>": n},
                                               "pattern": "static", "timestamp": "<ms>",
                                               "owned": {"<topic>": {"<partition>": stream}}}
    /consumers/<group>/owners/<topic>/<p>     EPHEMERAL ownership registry: the owning consumer
                                              thread id, ``<consumer id>-<stream>``
    /consumers/<group>/offsets/<topic>/<p>    PERSISTENT offset registry: the offset of the next
                                              message to consume, as a decimal string

The brokers' registries that consumers read and watch, ``/brokers/ids`` and
``/brokers/topics/<topic>``, are not modelled here: their one model is
``sluice.broker.cluster.zk_data`` (``BrokerIdsZNode``, ``TopicZNode``), whose ``TopicZNode``
reads Kafka 0.8's version 1 as well as the version 2 that Sluice's cluster mode and Kafka 2.x
write. Consumers only count a topic's partitions and list the live broker ids.

**Payload formats.** The consumer registry is JSON with ``"version": 1`` as in Kafka 0.8
(``timestamp`` is a string there; we write it so). ``owned`` is a Sluice addition that Kafka's
parsers ignore: the partitions the consumer acquired in its last successful rebalance, which is
what the sticky assignor reads as "previous" (see ``sluice.pipeline.consumer.rebalance``). The
owner and offset znodes keep Kafka 0.8's plain-text payloads (a thread id; a decimal offset)
rather than JSON, so Kafka's own tools (``ConsumerOffsetChecker``,
``kafka-consumer-groups --zookeeper``) and monitors that read the 0.8 layout (Burrow,
kafka-manager) read Sluice's groups unchanged. Their decoders also accept the JSON form
(``{"version": 1, "owner": ...}`` / ``{"version": 1, "offset": ...}``) so that a later switch
to JSON needs no migration.

A corrupt payload raises ``sluice.broker.cluster.zk_data.ZkDataError`` (the one error for a
znode that is not what its class expects), naming the path, what was expected and what was
found. Everything here is pure (no I/O) and thread-safe.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sluice.broker.cluster.zk_data import ZkDataError
from sluice.common.topic_partition import TopicPartition

__all__ = [
    "ConsumerGroupZNode",
    "ConsumerIdZNode",
    "ConsumerIdsZNode",
    "ConsumerRegistration",
    "OffsetZNode",
    "OffsetsTopicZNode",
    "OwnerZNode",
    "OwnersTopicZNode",
    "thread_id",
]

PAYLOAD_VERSION = 1


def _json(path: str, data: bytes, expected: str) -> dict[str, Any]:
    try:
        payload = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise ZkDataError(path, expected, data) from e
    if not isinstance(payload, dict) or payload.get("version") != PAYLOAD_VERSION:
        raise ZkDataError(path, f"{expected} with version {PAYLOAD_VERSION}", data)
    return payload


def thread_id(consumer_id: str, stream: int) -> str:
    """Kafka 0.8's consumer thread id: one assignor member per stream of a consumer."""
    return f"{consumer_id}-{stream}"


# --------------------------------------------------------------------------------------------
# Consumer registry
# --------------------------------------------------------------------------------------------


class ConsumerGroupZNode:
    """``/consumers/<group>``: the group's root."""

    @staticmethod
    def path(group: str) -> str:
        return f"/consumers/{group}"


class ConsumerIdsZNode:
    """``/consumers/<group>/ids``: its children are the group's live consumers."""

    @staticmethod
    def path(group: str) -> str:
        return f"/consumers/{group}/ids"


@dataclass(frozen=True)
class ConsumerRegistration:
    """The payload of one consumer's ids znode.

    ``subscription`` maps each topic to the number of streams the consumer reads it with
    (Kafka 0.8's ``topicCount``); ``owned`` maps a consumer thread id (``<id>-<stream>``) to the
    partitions it acquired in the consumer's last successful rebalance.
    """

    subscription: dict[str, int]
    timestamp_ms: int
    pattern: str = "static"
    owned: dict[str, list[TopicPartition]] = field(default_factory=dict)


class ConsumerIdZNode:
    """``/consumers/<group>/ids/<consumer id>``: ephemeral, the consumer's subscription."""

    @staticmethod
    def path(group: str, consumer_id: str) -> str:
        return f"{ConsumerIdsZNode.path(group)}/{consumer_id}"

    @staticmethod
    def encode(consumer_id: str, registration: ConsumerRegistration) -> bytes:
        owned: dict[str, dict[str, int]] = {}
        prefix = consumer_id + "-"
        for member, tps in sorted(registration.owned.items()):
            if not member.startswith(prefix):
                raise ValueError(f"owned: expected thread ids of {consumer_id!r}, found {member!r}")
            stream = int(member[len(prefix) :])
            for tp in tps:
                owned.setdefault(tp.topic, {})[str(tp.partition)] = stream
        payload = {
            "version": PAYLOAD_VERSION,
            "subscription": dict(sorted(registration.subscription.items())),
            "pattern": registration.pattern,
            "timestamp": str(registration.timestamp_ms),
            "owned": owned,
        }
        return json.dumps(payload).encode()

    @staticmethod
    def decode(group: str, consumer_id: str, data: bytes) -> ConsumerRegistration:
        path = ConsumerIdZNode.path(group, consumer_id)
        expected = 'JSON {"version": 1, "subscription": {"<topic>": <streams>}, ...}'
        payload = _json(path, data, expected)
        try:
            subscription = {str(t): int(n) for t, n in payload["subscription"].items()}
            owned: dict[str, list[TopicPartition]] = {}
            for topic, streams in (payload.get("owned") or {}).items():
                for partition, stream in streams.items():
                    member = thread_id(consumer_id, int(stream))
                    owned.setdefault(member, []).append(TopicPartition(topic, int(partition)))
            return ConsumerRegistration(
                subscription=subscription,
                timestamp_ms=int(payload.get("timestamp", 0)),
                pattern=str(payload.get("pattern", "static")),
                owned={m: sorted(tps) for m, tps in owned.items()},
            )
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            raise ZkDataError(path, expected, data) from e


# --------------------------------------------------------------------------------------------
# Ownership and offset registries
# --------------------------------------------------------------------------------------------


class OwnersTopicZNode:
    """``/consumers/<group>/owners/<topic>``: parent of the topic's ownership znodes."""

    @staticmethod
    def path(group: str, topic: str) -> str:
        return f"/consumers/{group}/owners/{topic}"


class OwnerZNode:
    """``/consumers/<group>/owners/<topic>/<partition>``: ephemeral, the owning thread id."""

    @staticmethod
    def path(group: str, tp: TopicPartition) -> str:
        return f"{OwnersTopicZNode.path(group, tp.topic)}/{tp.partition}"

    @staticmethod
    def encode(owner_thread_id: str) -> bytes:
        return owner_thread_id.encode()

    @staticmethod
    def decode(group: str, tp: TopicPartition, data: bytes) -> str:
        if data.startswith(b"{"):
            path = OwnerZNode.path(group, tp)
            payload = _json(path, data, 'a thread id or {"version": 1, "owner": "<thread id>"}')
            return str(payload.get("owner"))
        try:
            return data.decode()
        except UnicodeDecodeError as e:
            raise ZkDataError(OwnerZNode.path(group, tp), "a UTF-8 thread id", data) from e


class OffsetsTopicZNode:
    """``/consumers/<group>/offsets/<topic>``: parent of the topic's offset znodes."""

    @staticmethod
    def path(group: str, topic: str) -> str:
        return f"/consumers/{group}/offsets/{topic}"


class OffsetZNode:
    """``/consumers/<group>/offsets/<topic>/<partition>``: persistent, the next offset to read.

    Kafka 0.8 stored "the offset of the next message to consume" (the consumed offset + 1) here
    as a decimal string; so do we.
    """

    @staticmethod
    def path(group: str, tp: TopicPartition) -> str:
        return f"{OffsetsTopicZNode.path(group, tp.topic)}/{tp.partition}"

    @staticmethod
    def encode(offset: int) -> bytes:
        if offset < 0:
            raise ValueError(f"offset of a partition: expected >= 0, found {offset}")
        return str(offset).encode()

    @staticmethod
    def decode(group: str, tp: TopicPartition, data: bytes) -> int:
        path = OffsetZNode.path(group, tp)
        expected = 'a decimal offset >= 0 or {"version": 1, "offset": <n>}'
        try:
            if data.startswith(b"{"):
                value = _json(path, data, expected).get("offset")
                offset = value if isinstance(value, int) else -1
            else:
                offset = int(data.decode().strip())
        except (UnicodeDecodeError, ValueError) as e:
            raise ZkDataError(path, expected, data) from e
        if offset < 0:
            raise ZkDataError(path, expected, data)
        return offset
