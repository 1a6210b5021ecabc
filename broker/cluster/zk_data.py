"""The ZooKeeper layout of a Sluice cluster: one class per znode, as Kafka 2.x's ``ZkData.scala``.

Every class has ``path(...)``, and where the znode carries data, ``encode(...)`` → bytes and
``decode(bytes)`` → value. Payloads are Kafka's own, byte for byte where it matters, so Kafka's
tools (``zookeeper-shell``, ``kafka-topics --zookeeper`` of the 2.x line) read a Sluice cluster::

    /controller                          ephemeral  {"version":1,"brokerid":1,"timestamp":"…"}
    /controller_epoch                    persistent "7"  (a bare integer, as Kafka writes it)
    /brokers/ids/<id>                    ephemeral  {"version":4,"host","port","endpoints",
                                                     "listener_security_protocol_map",
                                                     "jmx_port":-1,"timestamp":"…"[,"rack"]}
    /brokers/topics/<topic>              persistent {"version":2,"partitions":{"0":[1,2,3]},
                                                     "adding_replicas":{},"removing_replicas":{},
                                                     "topic_id":"<base64 uuid>"[,"internal":true]}
    /brokers/topics/<topic>/partitions/<p>/state
                                         persistent {"version":1,"leader":1,"leader_epoch":0,
                                                     "isr":[1,2,3],"controller_epoch":7}
    /config/topics/<topic>               persistent {"version":1,"config":{"k":"v"}}
    /config/brokers/<id>                 persistent {"version":1,"config":{"k":"v"}}
    /config/brokers/<default>            persistent {"version":1,"config":{"k":"v"}}
    /config/changes/config_change_<seq>  persistent sequential
                                                    {"version":2,"entity_path":"topics/<t>"}
                                                    (or "brokers/<id>", "brokers/<default>")
    /admin/delete_topics/<topic>         persistent (no data): a deletion request
    /cluster/id                          persistent {"version":"1","id":"<base64 uuid>"}
    /latest_producer_id_block            persistent {"version":1,"broker":1,
                                                     "block_start":"0","block_end":"999"}
    /log_dir_event_notification/log_dir_event_<seq>
                                         persistent sequential
                                                    {"version":1,"broker":1,"event":1
                                                     [,"offline_partitions":[["t",0],…]]}

Sluice's additions are the optional ``"internal"`` key of a topic znode (Kafka derives it from
the name) and the optional ``"offline_partitions"`` of a log dir event (Kafka's controller asks
the broker with a LeaderAndIsr request instead; Sluice has no controller-to-broker RPC). Kafka
ignores unknown keys, so the payloads stay readable by Kafka.

``decode`` never returns half-parsed data: malformed bytes raise :class:`ZkDataError`, which
names the path and says what was expected and what was found. ``decode`` accepts what Kafka
itself accepts where Kafka is lenient (numbers written as strings in ``timestamp``,
``block_start``, ``version`` of ``/cluster/id``). All functions here are pure and thread-safe.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

NO_LEADER = -1
"""``leader`` of an offline partition (Kafka's ``LeaderAndIsr.NoLeader``)."""

PRODUCER_ID_BLOCK_SIZE = 1000


class ZkDataError(ValueError):
    """A znode's bytes are not what its class expects."""

    def __init__(self, path: str, expected: str, found: object) -> None:
        shown = found if not isinstance(found, bytes) else found[:200]
        super().__init__(f"{path}: expected {expected}, found {shown!r}")
        self.path = path


@dataclass(frozen=True)
class BrokerInfo:
    """A live broker, as registered under ``/brokers/ids/<id>``.

    ``host``/``port``: where other brokers reach it (its inter-broker listener).
    ``endpoints``: every advertised listener as ``(name, host, port)``, for clients, which are
    answered with the endpoints of the listener they connected to (Kafka's per-listener
    metadata); empty for a registration that names none (version 1)."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[tuple[str, str, int], ...] = ()

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """``(host, port)`` of the listener named ``listener``; without endpoints (an old
        registration), ``(host, port)``; None if the broker has no such listener."""
        if not self.endpoints:
            return self.host, self.port
        for name, host, port in self.endpoints:
            if name == listener:
                return host, port
        return None


@dataclass(frozen=True)
class PartitionState:
    """``/brokers/topics/<t>/partitions/<p>/state`` plus the znode version it was read at.

    ``zk_version`` is what a conditional write of this state must name: the write fails if
    anyone wrote the znode since it was read.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int


@dataclass(frozen=True)
class TopicAssignment:
    """The decoded ``/brokers/topics/<topic>``: replica list per partition, in preference order."""

    partitions: dict[int, tuple[int, ...]]
    topic_id: uuid.UUID | None = None
    internal: bool = False
    #: A reassignment in progress (KIP-455): replicas being added / removed per partition.
    adding: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removing: dict[int, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class ProducerIdBlock:
    """A block of producer ids ``[block_start, block_end]`` (both inclusive, as in Kafka)."""

    broker: int
    block_start: int
    block_end: int


# -- JSON helpers -----------------------------------------------------------------------------


def _json_bytes(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode("utf-8")


def _load_object(path: str, data: bytes | None) -> dict[str, Any]:
    if not data:
        raise ZkDataError(path, "a JSON object", data)
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ZkDataError(path, "UTF-8 JSON", data) from None
    if not isinstance(doc, dict):
        raise ZkDataError(path, "a JSON object", doc)
    return doc


def _require(path: str, doc: Mapping[str, Any], key: str) -> Any:
    if key not in doc:
        raise ZkDataError(path, f"a {key!r} field", doc)
    return doc[key]


def _int(path: str, doc: Mapping[str, Any], key: str, *, from_string: bool = False) -> int:
    value = _require(path, doc, key)
    if isinstance(value, bool):
        raise ZkDataError(path, f"an integer {key!r}", value)
    if isinstance(value, int):
        return value
    if from_string and isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise ZkDataError(path, f"an integer {key!r}", value)


def _int_list(path: str, value: object, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise ZkDataError(path, f"{what} as a list of integers", value)
    return tuple(value)


def _version(path: str, doc: Mapping[str, Any], supported: Sequence[int]) -> int:
    version = _int(path, doc, "version", from_string=True)
    if version not in supported:
        raise ZkDataError(path, f"version in {list(supported)}", version)
    return version


def encode_uuid(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def decode_uuid(path: str, text: object) -> uuid.UUID:
    """Parse Kafka's base64 form or the canonical ``8-4-4-4-12`` hex form."""
    if isinstance(text, str):
        try:
            if len(text) == 22:
                return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
            return uuid.UUID(text)
        except ValueError:
            pass
    raise ZkDataError(path, "a UUID (22-character base64 or 36-character hex)", text)


def _now_ms() -> str:
    return str(int(time.time() * 1000))


# -- top-level paths --------------------------------------------------------------------------


class BrokersZNode:
    @staticmethod
    def path() -> str:
        return "/brokers"


class BrokerIdsZNode:
    """Parent of the brokers' ephemeral registrations; its children are the live brokers."""

    @staticmethod
    def path() -> str:
        return "/brokers/ids"


class TopicsZNode:
    """Parent of the topic znodes; its children are the topics."""

    @staticmethod
    def path() -> str:
        return "/brokers/topics"


class ConfigTopicsZNode:
    @staticmethod
    def path() -> str:
        return "/config/topics"


class DeleteTopicsZNode:
    """Parent of the deletion requests (``/admin/delete_topics``)."""

    @staticmethod
    def path() -> str:
        return "/admin/delete_topics"


# -- the controller ---------------------------------------------------------------------------


class ControllerZNode:
    """``/controller``: the ephemeral znode whose creator is the active controller."""

    @staticmethod
    def path() -> str:
        return "/controller"

    @staticmethod
    def encode(broker_id: int, timestamp_ms: int | None = None) -> bytes:
        ts = str(timestamp_ms) if timestamp_ms is not None else _now_ms()
        return _json_bytes({"version": 1, "brokerid": broker_id, "timestamp": ts})

    @classmethod
    def decode(cls, data: bytes | None) -> int:
        """The controller's broker id."""
        doc = _load_object(cls.path(), data)
        _version(cls.path(), doc, (1,))
        return _int(cls.path(), doc, "brokerid")


class ControllerEpochZNode:
    """``/controller_epoch``: the number of controller elections won so far (Kafka writes a bare
    integer here, not JSON). Incremented only conditionally on its znode version; controller
    writes are fenced by checking that version (a newer controller has changed it)."""

    INITIAL = 0

    @staticmethod
    def path() -> str:
        return "/controller_epoch"

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode("ascii")

    @classmethod
    def decode(cls, data: bytes | None) -> int:
        text = (data or b"").decode("ascii", errors="replace").strip()
        if not text.isdigit():
            raise ZkDataError(cls.path(), "a non-negative decimal integer", data)
        return int(text)


# -- brokers ----------------------------------------------------------------------------------


class BrokerIdZNode:
    """``/brokers/ids/<id>``: a live broker's ephemeral registration (Kafka's version 4 JSON:
    endpoints plus the top-level host and port older clients read)."""

    VERSION = 4

    @staticmethod
    def path(broker_id: int) -> str:
        return f"/brokers/ids/{broker_id}"

    @staticmethod
    def encode(
        host: str,
        port: int,
        rack: str | None = None,
        timestamp_ms: int | None = None,
        endpoints: Sequence[tuple[str, str, str, int]] = (),
    ) -> bytes:
        """``endpoints``: every advertised listener as ``(name, protocol, host, port)``; none
        given: one PLAINTEXT listener at ``host:port``. The top-level ``host``/``port`` are
        the PLAINTEXT listener's, or null/-1 without one, as Kafka writes them."""
        listed = list(endpoints) or [("PLAINTEXT", "PLAINTEXT", host, port)]
        plaintext = next((e for e in listed if e[0] == "PLAINTEXT"), None)
        doc: dict[str, Any] = {
            "version": BrokerIdZNode.VERSION,
            "host": plaintext[2] if plaintext else None,
            "port": plaintext[3] if plaintext else -1,
            "endpoints": [f"{name}://{h}:{p}" for name, _, h, p in listed],
            "listener_security_protocol_map": {name: proto for name, proto, _, _ in listed},
            "jmx_port": -1,
            "timestamp": str(timestamp_ms) if timestamp_ms is not None else _now_ms(),
        }
        if rack is not None:
            doc["rack"] = rack
        return _json_bytes(doc)

    @classmethod
    def decode(cls, broker_id: int, data: bytes | None, listener: str | None = None) -> BrokerInfo:
        """The registration; ``host``/``port`` of the listener named ``listener`` (the
        reader's inter-broker listener) when the broker has it, else the top-level ones."""
        path = cls.path(broker_id)
        doc = _load_object(path, data)
        version = _version(path, doc, (1, 2, 3, 4, 5))
        host, port = doc.get("host"), doc.get("port")
        named: list[tuple[str, str, int]] = []
        if version >= 2 and isinstance(doc.get("endpoints"), list):
            for entry in doc["endpoints"]:
                name = entry.split("://", 1)[0] if isinstance(entry, str) else ""
                named.append((name, *_parse_endpoint(path, entry)))
        chosen = next((e for e in named if e[0] == listener), None)
        if chosen is not None:
            host, port = chosen[1], chosen[2]
        if version >= 2 and (not isinstance(host, str) or not host):
            # Kafka registers host null / port -1 when there is no PLAINTEXT listener.
            endpoints = _require(path, doc, "endpoints")
            if not isinstance(endpoints, list) or not endpoints:
                raise ZkDataError(path, "a non-empty 'endpoints' list", endpoints)
            host, port = _parse_endpoint(path, endpoints[0])
        if not isinstance(host, str) or not host:
            raise ZkDataError(path, "a 'host' string", host)
        if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
            raise ZkDataError(path, "a 'port' in 1..65535", port)
        rack = doc.get("rack")
        if rack is not None and not isinstance(rack, str):
            raise ZkDataError(path, "a 'rack' string or null", rack)
        return BrokerInfo(broker_id, host, port, rack, tuple(named))


def _parse_endpoint(path: str, endpoint: object) -> tuple[str, int]:
    """``"LISTENER://host:port"`` → ``(host, port)``."""
    if isinstance(endpoint, str) and "://" in endpoint:
        address = endpoint.split("://", 1)[1]
        host, sep, port = address.rpartition(":")
        if sep and port.isdigit():
            return host.strip("[]"), int(port)
    raise ZkDataError(path, "an endpoint 'LISTENER://host:port'", endpoint)


# -- topics -----------------------------------------------------------------------------------


class TopicZNode:
    """``/brokers/topics/<topic>``: the replica assignment, written once at creation."""

    VERSION = 2

    @staticmethod
    def path(topic: str) -> str:
        return f"/brokers/topics/{topic}"

    @staticmethod
    def encode(
        partitions: Mapping[int, Sequence[int]],
        topic_id: uuid.UUID | None = None,
        *,
        internal: bool = False,
        adding: Mapping[int, Sequence[int]] | None = None,
        removing: Mapping[int, Sequence[int]] | None = None,
    ) -> bytes:
        doc: dict[str, Any] = {
            "version": TopicZNode.VERSION,
            "partitions": {str(p): list(r) for p, r in sorted(partitions.items())},
            "adding_replicas": {str(p): list(r) for p, r in sorted((adding or {}).items())},
            "removing_replicas": {str(p): list(r) for p, r in sorted((removing or {}).items())},
        }
        if topic_id is not None:
            doc["topic_id"] = encode_uuid(topic_id)
        if internal:
            doc["internal"] = True
        return _json_bytes(doc)

    @classmethod
    def decode(cls, topic: str, data: bytes | None) -> TopicAssignment:
        path = cls.path(topic)
        doc = _load_object(path, data)
        _version(path, doc, (1, 2, 3))
        raw = _require(path, doc, "partitions")
        if not isinstance(raw, dict) or not raw:
            raise ZkDataError(path, "a non-empty 'partitions' object", raw)
        partitions: dict[int, tuple[int, ...]] = {}
        for key, replicas in raw.items():
            if not key.isdigit():
                raise ZkDataError(path, "partition ids as decimal strings", key)
            replicas = _int_list(path, replicas, f"the replicas of partition {key}")
            if not replicas or len(set(replicas)) != len(replicas):
                raise ZkDataError(path, f"distinct replicas for partition {key}", list(replicas))
            partitions[int(key)] = replicas
        if sorted(partitions) != list(range(len(partitions))):
            raise ZkDataError(path, f"partitions 0..{len(partitions) - 1}", sorted(partitions))
        topic_id = decode_uuid(path, doc["topic_id"]) if doc.get("topic_id") else None
        internal = doc.get("internal", False)
        if not isinstance(internal, bool):
            raise ZkDataError(path, "a boolean 'internal'", internal)
        moving = []
        for key in ("adding_replicas", "removing_replicas"):
            raw_moving = doc.get(key) or {}
            if not isinstance(raw_moving, dict) or not all(k.isdigit() for k in raw_moving):
                raise ZkDataError(path, f"an object of partition ids in {key!r}", raw_moving)
            moving.append(
                {int(k): _int_list(path, v, f"{key} of {k}") for k, v in raw_moving.items()}
            )
        return TopicAssignment(partitions, topic_id, internal, moving[0], moving[1])


class TopicPartitionsZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"/brokers/topics/{topic}/partitions"


class TopicPartitionZNode:
    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"/brokers/topics/{topic}/partitions/{partition}"


class TopicPartitionStateZNode:
    """``/brokers/topics/<t>/partitions/<p>/state``: leader, leader epoch, ISR and the epoch of
    the controller that last wrote it. Written only conditionally on its znode version — by the
    controller (fenced by ``/controller_epoch``) or by the partition's leader (ISR changes)."""

    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"/brokers/topics/{topic}/partitions/{partition}/state"

    @staticmethod
    def encode(leader: int, leader_epoch: int, isr: Sequence[int], controller_epoch: int) -> bytes:
        return _json_bytes(
            {
                "version": 1,
                "leader": leader,
                "leader_epoch": leader_epoch,
                "isr": list(isr),
                "controller_epoch": controller_epoch,
            }
        )

    @classmethod
    def encode_state(cls, state: PartitionState) -> bytes:
        return cls.encode(state.leader, state.leader_epoch, state.isr, state.controller_epoch)

    @classmethod
    def decode(
        cls, data: bytes | None, zk_version: int, *, topic: str = "<topic>", partition: int = -1
    ) -> PartitionState:
        path = cls.path(topic, partition)
        doc = _load_object(path, data)
        _version(path, doc, (1,))
        leader = _int(path, doc, "leader")
        leader_epoch = _int(path, doc, "leader_epoch")
        isr = _int_list(path, _require(path, doc, "isr"), "'isr'")
        controller_epoch = _int(path, doc, "controller_epoch")
        if leader < NO_LEADER or leader_epoch < 0 or controller_epoch < 0:
            raise ZkDataError(path, "leader >= -1 and non-negative epochs", doc)
        return PartitionState(leader, leader_epoch, isr, controller_epoch, zk_version)


class TopicConfigZNode:
    """``/config/topics/<topic>``: the topic's overrides of the broker defaults."""

    @staticmethod
    def path(topic: str) -> str:
        return f"/config/topics/{topic}"

    @staticmethod
    def encode(config: Mapping[str, str]) -> bytes:
        return _json_bytes({"version": 1, "config": dict(config)})

    @classmethod
    def decode(cls, topic: str, data: bytes | None) -> dict[str, str]:
        path = cls.path(topic)
        if not data:  # Kafka treats a config znode without data as "no overrides"
            return {}
        doc = _load_object(path, data)
        _version(path, doc, (1,))
        config = _require(path, doc, "config")
        if not isinstance(config, dict) or not all(isinstance(v, str) for v in config.values()):
            raise ZkDataError(path, "a 'config' object of strings", config)
        return dict(config)


class BrokerConfigZNode:
    """``/config/brokers/<id>``: one broker's dynamic configs; ``/config/brokers/<default>``:
    the cluster-wide defaults of every broker (Kafka's ``ConfigEntityZNode`` for the
    ``brokers`` entity type, written by ``AdminZkClient.changeBrokerConfig``). The payload is a
    topic config's: ``{"version":1,"config":{"k":"v"}}``."""

    #: The entity name of the cluster-wide defaults (Kafka's ``ZooKeeperInternals.DEFAULT_STRING``).
    DEFAULT = "<default>"

    @staticmethod
    def path(entity: str) -> str:
        return f"/config/brokers/{entity}"

    @staticmethod
    def encode(config: Mapping[str, str]) -> bytes:
        return _json_bytes({"version": 1, "config": dict(config)})

    @classmethod
    def decode(cls, entity: str, data: bytes | None) -> dict[str, str]:
        path = cls.path(entity)
        if not data:  # as a topic's: a config znode without data holds no configs
            return {}
        doc = _load_object(path, data)
        _version(path, doc, (1,))
        config = _require(path, doc, "config")
        if not isinstance(config, dict) or not all(isinstance(v, str) for v in config.values()):
            raise ZkDataError(path, "a 'config' object of strings", config)
        return dict(config)


class ConfigChangesZNode:
    """``/config/changes``: parent of the config change notifications brokers watch."""

    @staticmethod
    def path() -> str:
        return "/config/changes"


class ConfigChangeNotificationZNode:
    """``/config/changes/config_change_<seq>`` (persistent sequential): "the config of this
    entity changed" — Kafka's ``ConfigEntityChangeNotificationSequenceZNode``, written after the
    entity's config znode (``AdminZkClient.changeEntityConfig``)."""

    PREFIX = "config_change_"
    VERSION = 2

    @classmethod
    def path_prefix(cls) -> str:
        return f"{ConfigChangesZNode.path()}/{cls.PREFIX}"

    @classmethod
    def sequence(cls, child: str) -> int | None:
        """The sequence number of a child of ``/config/changes``, None if not a notification."""
        digits = child[len(cls.PREFIX) :]
        return int(digits) if child.startswith(cls.PREFIX) and digits.isdigit() else None

    @classmethod
    def encode_topic(cls, topic: str) -> bytes:
        return _json_bytes({"version": cls.VERSION, "entity_path": f"topics/{topic}"})

    @classmethod
    def encode_broker(cls, entity: str) -> bytes:
        """A change of ``/config/brokers/<entity>`` (a broker id or ``<default>``)."""
        return _json_bytes({"version": cls.VERSION, "entity_path": f"brokers/{entity}"})

    @classmethod
    def decode(cls, child: str, data: bytes | None) -> tuple[str, str]:
        """``(entity type, entity name)``, e.g. ``("topics", "t")``."""
        path = f"{ConfigChangesZNode.path()}/{child}"
        doc = _load_object(path, data)
        _version(path, doc, (2,))
        entity = _require(path, doc, "entity_path")
        if not isinstance(entity, str) or "/" not in entity:
            raise ZkDataError(path, "an 'entity_path' of the form <type>/<name>", entity)
        kind, _, name = entity.partition("/")
        return kind, name


class DeleteTopicsTopicZNode:
    """``/admin/delete_topics/<topic>``: a request to delete the topic; its existence is the
    request (no data). The controller deletes it once the topic is gone."""

    @staticmethod
    def path(topic: str) -> str:
        return f"/admin/delete_topics/{topic}"

    @staticmethod
    def encode() -> bytes:
        return b""

    @staticmethod
    def decode(data: bytes | None) -> None:
        return None


class LogDirEventNotificationZNode:
    """``/log_dir_event_notification``: parent of the log dir events the controller watches."""

    @staticmethod
    def path() -> str:
        return "/log_dir_event_notification"


class LogDirEventNotificationSequenceZNode:
    """``/log_dir_event_notification/log_dir_event_<seq>`` (persistent sequential): "a log dir of
    this broker failed" — Kafka's ``LogDirEventNotificationSequenceZNode``, written by the broker
    (``KafkaZkClient.propagateLogDirEvent``), read and deleted by the controller.

    ``offline_partitions`` (Sluice's addition; see the module docstring) lists every replica of
    the broker that is offline *now*: each event replaces the broker's previous one, so an empty
    list says its dirs are back. Without the key (an event written by Kafka's tools) every
    replica of the broker counts as offline (``None``)."""

    PREFIX = "log_dir_event_"
    VERSION = 1
    LOG_DIR_FAILURE = 1  # Kafka's LogDirEventNotificationHandler.LogDirFailureEvent

    @classmethod
    def path_prefix(cls) -> str:
        return f"{LogDirEventNotificationZNode.path()}/{cls.PREFIX}"

    @classmethod
    def sequence(cls, child: str) -> int | None:
        """The sequence number of a child of the parent, None if not an event."""
        digits = child[len(cls.PREFIX) :]
        return int(digits) if child.startswith(cls.PREFIX) and digits.isdigit() else None

    @classmethod
    def encode(cls, broker: int, offline_partitions: Sequence[tuple[str, int]]) -> bytes:
        return _json_bytes({
            "version": cls.VERSION,
            "broker": broker,
            "event": cls.LOG_DIR_FAILURE,
            "offline_partitions": [[t, p] for t, p in sorted(offline_partitions)],
        })  # fmt: skip

    @classmethod
    def decode(
        cls, child: str, data: bytes | None
    ) -> tuple[int, frozenset[tuple[str, int]] | None]:
        """``(broker, offline partitions or None for "all of its replicas")``."""
        path = f"{LogDirEventNotificationZNode.path()}/{child}"
        doc = _load_object(path, data)
        _version(path, doc, (cls.VERSION,))
        broker = _int(path, doc, "broker")
        event = _int(path, doc, "event")
        if event != cls.LOG_DIR_FAILURE:
            raise ZkDataError(path, f"event {cls.LOG_DIR_FAILURE} (log dir failure)", event)
        raw = doc.get("offline_partitions")
        if raw is None:
            return broker, None
        ok = isinstance(raw, list) and all(
            isinstance(e, list) and len(e) == 2 and isinstance(e[0], str)
            and isinstance(e[1], int) and not isinstance(e[1], bool)
            for e in raw
        )  # fmt: skip
        if not ok:
            raise ZkDataError(path, "'offline_partitions' as a list of [topic, partition]", raw)
        return broker, frozenset((t, p) for t, p in raw)


# -- cluster-wide -----------------------------------------------------------------------------


class ClusterIdZNode:
    """``/cluster/id``: the cluster id, created once by whichever broker starts first."""

    @staticmethod
    def path() -> str:
        return "/cluster/id"

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return _json_bytes({"version": "1", "id": cluster_id})  # Kafka writes "1", a string

    @staticmethod
    def generate() -> str:
        """A new id as Kafka makes them: a random UUID in URL-safe base64 (22 characters)."""
        return encode_uuid(uuid.uuid4())

    @classmethod
    def decode(cls, data: bytes | None) -> str:
        doc = _load_object(cls.path(), data)
        _version(cls.path(), doc, (1,))
        cluster_id = _require(cls.path(), doc, "id")
        if not isinstance(cluster_id, str) or not cluster_id:
            raise ZkDataError(cls.path(), "a non-empty 'id' string", cluster_id)
        return cluster_id


class ProducerIdBlockZNode:
    """``/latest_producer_id_block``: the last block of producer ids handed to a broker.

    A broker takes the next block by a conditional write on this znode's version, so blocks
    never overlap across brokers. Kafka creates the znode empty; empty means "no block yet"
    (:meth:`decode` returns ``None``)."""

    @staticmethod
    def path() -> str:
        return "/latest_producer_id_block"

    @staticmethod
    def encode(block: ProducerIdBlock) -> bytes:
        return _json_bytes(
            {
                "version": 1,
                "broker": block.broker,
                "block_start": str(block.block_start),
                "block_end": str(block.block_end),
            }
        )

    @classmethod
    def decode(cls, data: bytes | None) -> ProducerIdBlock | None:
        if not data:
            return None
        path = cls.path()
        doc = _load_object(path, data)
        _version(path, doc, (1,))
        block = ProducerIdBlock(
            broker=_int(path, doc, "broker"),
            block_start=_int(path, doc, "block_start", from_string=True),
            block_end=_int(path, doc, "block_end", from_string=True),
        )
        if not 0 <= block.block_start <= block.block_end:
            raise ZkDataError(path, "0 <= block_start <= block_end", doc)
        return block

    @staticmethod
    def next_block(previous: ProducerIdBlock | None, broker: int) -> ProducerIdBlock:
        start = 0 if previous is None else previous.block_end + 1
        return ProducerIdBlock(broker, start, start + PRODUCER_ID_BLOCK_SIZE - 1)


PERSISTENT_PATHS = (
    BrokerIdsZNode.path(),
    TopicsZNode.path(),
    ConfigTopicsZNode.path(),
    ConfigChangesZNode.path(),
    DeleteTopicsZNode.path(),
    LogDirEventNotificationZNode.path(),
    "/cluster",
)
"""Parents every broker makes sure exist before it registers (Kafka's ``PersistentZkPaths``)."""
