"""The records of ``__consumer_offsets`` in Kafka's binary schemas (``OffsetCommitKey/Value``,
``GroupMetadataKey/Value``, Kafka's ``group-coordinator/src/main/resources/common/message``),
so tools that read the topic directly — lag checkers, Burrow, ``kafka-console-consumer`` with
Kafka's ``OffsetsMessageFormatter`` / ``GroupMetadataMessageFormatter`` — decode it.

Every key and value starts with its schema version, an INT16 (big-endian). A key's version is
the record's *type*: 0 and 1 an offset commit, 2 a group's metadata (Kafka 4's coordinator
adds its KIP-848 record types from 3 up; :data:`KEY_TYPES` maps a type to its key schema and
:data:`VALUE_OF_KEY` to its value schema, so a new type is one entry in each and its schemas
in :data:`SCHEMAS`). A value's version selects its fields. Non-flexible versions: strings are
an INT16 length then UTF-8 (length -1: null, only where "nullable"); BYTES an INT32 length then
the bytes; arrays an INT32 count then the elements. Flexible versions (a schema's
``flexible_from``: 4 for both values here, as in Kafka 4) use compact forms — a string, bytes
or an array is an unsigned varint of length + 1 (0: null) — and end every struct with tagged
fields (an unsigned varint count, then per field its tag, its size and its bytes; tags this
reader does not know are skipped)::

    key, version 0 or 1 — an offset commit       key, version 2 — a group's metadata
        group      STRING                            group      STRING
        topic      STRING
        partition  INT32

    OffsetCommitValue (value of key 0/1)         GroupMetadataValue (value of key 2)
        offset           INT64   v0+                 protocolType           STRING     v0+
        leaderEpoch      INT32   v3+ (else -1)       generation             INT32      v0+
        metadata         STRING  v0+                 protocol               STRING?    v0+
        commitTimestamp  INT64   v0+                 leader                 STRING?    v0+
        expireTimestamp  INT64   v1 only (else -1)   currentStateTimestamp  INT64      v2+ (-1)
                                                     members  [MemberMetadata]         v0+
    MemberMetadata
        memberId  STRING v0+ · groupInstanceId STRING? v3+ (else null) · clientId STRING v0+ ·
        clientHost STRING v0+ · rebalanceTimeout INT32 v1+ (else sessionTimeout) ·
        sessionTimeout INT32 v0+ · subscription BYTES v0+ · assignment BYTES v0+

A null value is a tombstone: the offset (or the group) was deleted. **What is written** is what
Kafka 3.x writes, so that every reader of the topic (Burrow, Kafka 2.x/3.x formatters) decodes
it: key version 1 for a commit and OffsetCommitValue v3 (v1 when an expire timestamp is set);
key version 2 for a group and GroupMetadataValue v3. Versions 0–4 of both values are read
(v4 is Kafka 4's flexible one); :func:`encode_value` writes any version of any schema. A key
type not in :data:`KEY_TYPES` (a record type of a newer Kafka) decodes to ``None`` and is
skipped by readers, as Kafka's loader skips unknown keys.

Before these, Sluice wrote JSON records (``{"version": 1, "group": …}``). Such a log is
migrated, not refused (see ``sluice.broker.groups.offset_store``): :func:`is_legacy_json`
tells them apart — a JSON key starts with ``{`` (0x7B), a binary key with a small version —
and :func:`decode_legacy_key` / :func:`decode_legacy_value` read them.

The schemas are data (:data:`SCHEMAS`); one reader and one writer walk them. Pure;
thread-safe (the tables are only read once the module is imported).
"""

from __future__ import annotations

import json
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3


class CorruptOffsetsRecordError(ValueError):
    """A ``__consumer_offsets`` key or value is shorter or longer than its schema says, or
    is not what its version announces."""


class UnsupportedOffsetsRecordVersionError(CorruptOffsetsRecordError):
    """A value's schema version is one this reader does not know."""


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass(frozen=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...]


@dataclass(frozen=True)
class ConsumerGroupKey:
    """The key of a consumer group's group-wide records (types 3 and 6)."""

    group: str


@dataclass(frozen=True)
class ConsumerMemberKey:
    """The key of a consumer group member's records (types 5, 7 and 8)."""

    group: str
    member_id: str


@dataclass(frozen=True)
class ConsumerGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass(frozen=True)
class ConsumerTopicPartitions:
    topic_id: uuid.UUID
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[ConsumerTopicPartitions, ...]


@dataclass(frozen=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # Kafka's MemberState: 0 stable, 1 unrevoked, 2 unreleased partitions
    assigned_partitions: tuple[ConsumerTopicPartitions, ...]
    partitions_pending_revocation: tuple[ConsumerTopicPartitions, ...]


# -- the schemas, as data -------------------------------------------------------------------

#: The last version of an open range ("3+").
LATEST = 0x7FFF


@dataclass(frozen=True)
class Field:
    """One field of a schema, as in Kafka's message JSON: ``kind`` is ``int8``, ``int16``,
    ``int32``, ``int64``, ``bool``, ``uuid``, ``string``, ``bytes``, a schema's name (a
    struct) or ``[kind]`` (an array); a trailing ``?`` makes it nullable. It is present in
    versions ``first``..``last``; absent, it reads as ``default``. ``tag``: a tagged field of
    the flexible versions (written only when it is not ``default``)."""

    name: str
    kind: str
    first: int = 0
    last: int = LATEST
    default: Any = None
    tag: int | None = None


@dataclass(frozen=True)
class Schema:
    """A key, value or struct schema: its fields, the first flexible version (``LATEST + 1``:
    none), the versions a reader accepts and what builds the decoded object from its
    fields' values (by name)."""

    name: str
    fields: tuple[Field, ...]
    build: Callable[..., Any]
    flexible_from: int = LATEST + 1
    versions: tuple[int, int] = (0, 0)
    defaults: dict[str, Any] = field(default_factory=dict)


def _member(**fields: Any) -> MemberMetadata:
    if fields["rebalance_timeout"] is None:  # absent before v1: Kafka's loader uses the session
        fields["rebalance_timeout"] = fields["session_timeout"]
    return MemberMetadata(**fields)


#: Every schema by name. Keys are never flexible (Kafka's coordinator keys are version 0,
#: "flexibleVersions": "none"); their version is the record type, so a key schema's fields
#: hold for every version the key types of :data:`KEY_TYPES` give it.
SCHEMAS: dict[str, Schema] = {
    s.name: s
    for s in (
        Schema(
            "OffsetCommitKey",
            (Field("group", "string"), Field("topic", "string"), Field("partition", "int32")),
            OffsetCommitKey,
            versions=(0, 1),
        ),  # fmt: skip
        Schema("GroupMetadataKey", (Field("group", "string"),), GroupMetadataKey, versions=(2, 2)),
        Schema(
            "OffsetCommitValue",
            (
                Field("offset", "int64"),
                Field("leader_epoch", "int32", 3, default=-1),
                Field("metadata", "string"),
                Field("commit_timestamp", "int64"),
                Field("expire_timestamp", "int64", 1, 1, default=-1),
            ),
            OffsetCommitValue,
            flexible_from=4,
            versions=(0, 4),
        ),  # fmt: skip
        Schema(
            "GroupMetadataValue",
            (
                Field("protocol_type", "string"),
                Field("generation", "int32"),
                Field("protocol", "string?"),
                Field("leader", "string?"),
                Field("current_state_timestamp", "int64", 2, default=-1),
                Field("members", "[MemberMetadata]"),
            ),
            GroupMetadataValue,
            flexible_from=4,
            versions=(0, 4),
        ),  # fmt: skip
        Schema(
            "MemberMetadata",
            (
                Field("member_id", "string"),
                Field("group_instance_id", "string?", 3),
                Field("client_id", "string"),
                Field("client_host", "string"),
                Field("rebalance_timeout", "int32", 1),
                Field("session_timeout", "int32"),
                Field("subscription", "bytes"),
                Field("assignment", "bytes"),
            ),
            _member,
            flexible_from=4,
            versions=(0, 4),
        ),  # fmt: skip
        # Kafka 4's consumer groups (KIP-848): one record per group-wide fact and per member
        # fact, every value version 0 and flexible. Tagged fields of later Kafkas (the
        # classic member metadata, assignment epochs and timestamps) are skipped.
        *(
            Schema(name, (Field("group", "string"),), ConsumerGroupKey, versions=(t, t))
            for name, t in (
                ("ConsumerGroupMetadataKey", 3),
                ("ConsumerGroupTargetAssignmentMetadataKey", 6),
            )
        ),
        *(
            Schema(
                name,
                (Field("group", "string"), Field("member_id", "string")),
                ConsumerMemberKey,
                versions=(t, t),
            )
            for name, t in (
                ("ConsumerGroupMemberMetadataKey", 5),
                ("ConsumerGroupTargetAssignmentMemberKey", 7),
                ("ConsumerGroupCurrentMemberAssignmentKey", 8),
            )
        ),  # fmt: skip
        Schema(
            "ConsumerGroupMetadataValue",
            (Field("epoch", "int32"), Field("metadata_hash", "int64", default=0, tag=0)),
            ConsumerGroupMetadataValue,
            flexible_from=0,
        ),
        Schema(
            "ConsumerGroupMemberMetadataValue",
            (
                Field("instance_id", "string?"),
                Field("rack_id", "string?"),
                Field("client_id", "string"),
                Field("client_host", "string"),
                Field("subscribed_topic_names", "[string]"),
                Field("subscribed_topic_regex", "string?"),
                Field("rebalance_timeout_ms", "int32"),
                Field("server_assignor", "string?"),
            ),
            ConsumerGroupMemberMetadataValue,
            flexible_from=0,
        ),
        Schema(
            "ConsumerTopicPartitions",
            (Field("topic_id", "uuid"), Field("partitions", "[int32]")),
            ConsumerTopicPartitions,
            flexible_from=0,
        ),
        Schema(
            "ConsumerGroupTargetAssignmentMetadataValue",
            (Field("assignment_epoch", "int32"),),
            ConsumerGroupTargetAssignmentMetadataValue,
            flexible_from=0,
        ),
        Schema(
            "ConsumerGroupTargetAssignmentMemberValue",
            (Field("topic_partitions", "[ConsumerTopicPartitions]"),),
            ConsumerGroupTargetAssignmentMemberValue,
            flexible_from=0,
        ),
        Schema(
            "ConsumerGroupCurrentMemberAssignmentValue",
            (
                Field("member_epoch", "int32"),
                Field("previous_member_epoch", "int32"),
                Field("state", "int8"),
                Field("assigned_partitions", "[ConsumerTopicPartitions]"),
                Field("partitions_pending_revocation", "[ConsumerTopicPartitions]"),
            ),
            ConsumerGroupCurrentMemberAssignmentValue,
            flexible_from=0,
        ),
    )
}
#: Key version (the record type) → the key's schema. Type 4 (Kafka 4.0's partition metadata,
#: replaced by the group's metadata hash in 4.1) is not read: it carries nothing the group
#: needs back, and a reader skips unknown types.
KEY_TYPES: dict[int, str] = {
    0: "OffsetCommitKey",
    1: "OffsetCommitKey",
    2: "GroupMetadataKey",
    3: "ConsumerGroupMetadataKey",
    5: "ConsumerGroupMemberMetadataKey",
    6: "ConsumerGroupTargetAssignmentMetadataKey",
    7: "ConsumerGroupTargetAssignmentMemberKey",
    8: "ConsumerGroupCurrentMemberAssignmentKey",
}
#: A key's schema → its value's schema.
VALUE_OF_KEY: dict[str, str] = {
    "OffsetCommitKey": "OffsetCommitValue",
    "GroupMetadataKey": "GroupMetadataValue",
    "ConsumerGroupMetadataKey": "ConsumerGroupMetadataValue",
    "ConsumerGroupMemberMetadataKey": "ConsumerGroupMemberMetadataValue",
    "ConsumerGroupTargetAssignmentMetadataKey": "ConsumerGroupTargetAssignmentMetadataValue",
    "ConsumerGroupTargetAssignmentMemberKey": "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupCurrentMemberAssignmentKey": "ConsumerGroupCurrentMemberAssignmentValue",
}

_INTS = {
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "int32": struct.Struct(">i"),
    "int64": struct.Struct(">q"),
}


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _write_value(out: bytearray, kind: str, version: int, flexible: bool, value: Any) -> None:
    nullable = kind.endswith("?")
    base = kind.rstrip("?")
    if value is None and base not in ("string", "bytes") and not base.startswith("["):
        raise ValueError(f"a {kind} cannot be None")
    if value is None and not nullable:
        raise ValueError(f"expected a {kind}, found None")
    if base in _INTS:
        out += _INTS[base].pack(value)
    elif base == "bool":
        out.append(1 if value else 0)
    elif base == "uuid":
        out += value.bytes
    elif base in ("string", "bytes"):
        data = None if value is None else (value.encode() if base == "string" else bytes(value))
        if flexible:
            out += _uvarint(0 if data is None else len(data) + 1)
        elif base == "string":
            out += _INTS["int16"].pack(-1 if data is None else len(data))
        else:
            out += _INTS["int32"].pack(-1 if data is None else len(data))
        out += data or b""
    elif base.startswith("["):
        element = base[1:-1]
        if flexible:
            out += _uvarint(0 if value is None else len(value) + 1)
        else:
            out += _INTS["int32"].pack(-1 if value is None else len(value))
        for item in value or ():
            _write_value(out, element, version, flexible, item)
    else:
        _write_struct(out, SCHEMAS[base], version, value)


def _write_struct(out: bytearray, schema: Schema, version: int, obj: Any) -> None:
    flexible = version >= schema.flexible_from
    tagged: list[tuple[int, bytes]] = []
    for f in schema.fields:
        if not f.first <= version <= f.last:
            continue
        value = getattr(obj, f.name)
        if f.tag is not None:
            if flexible and value != f.default:
                data = bytearray()
                _write_value(data, f.kind, version, flexible, value)
                tagged.append((f.tag, bytes(data)))
            continue
        try:
            _write_value(out, f.kind, version, flexible, value)
        except ValueError as exc:
            raise ValueError(f"{schema.name}.{f.name}: {exc}") from None
    if flexible:
        out += _uvarint(len(tagged))
        for tag, field_bytes in sorted(tagged):
            out += _uvarint(tag) + _uvarint(len(field_bytes)) + field_bytes


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = data, 0, what

    def fail(self, message: str) -> CorruptOffsetsRecordError:
        return CorruptOffsetsRecordError(f"{self.what}: {message}")

    def take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise self.fail(
                f"expected {size} more bytes at byte {self.pos}, found {len(self.data) - self.pos}"
            )
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def integer(self, kind: str) -> int:
        fmt = _INTS[kind]
        (value,) = fmt.unpack(self.take(fmt.size))
        return int(value)

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            (byte,) = self.take(1)
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise self.fail(f"an unsigned varint longer than 5 bytes at byte {self.pos}")

    def length(self, kind: str, flexible: bool) -> int:
        """A string's, bytes' or array's length; -1 for null."""
        if flexible:
            return self.uvarint() - 1
        return self.integer("int16" if kind == "string" else "int32")

    def value(self, kind: str, version: int, flexible: bool, name: str) -> Any:
        nullable = kind.endswith("?")
        base = kind.rstrip("?")
        if base in _INTS:
            return self.integer(base)
        if base == "bool":
            return self.take(1) != b"\x00"
        if base == "uuid":
            return uuid.UUID(bytes=self.take(16))
        size = self.length("string" if base == "string" else "bytes", flexible)
        if size == -1 and nullable:
            return None
        if size < 0:
            raise self.fail(f"field {name}: a null {kind} (length {size})")
        if base == "string":
            try:
                return self.take(size).decode()
            except UnicodeDecodeError as exc:
                raise self.fail(f"field {name} is not UTF-8: {exc}") from exc
        if base == "bytes":
            return self.take(size)
        if not base.startswith("["):
            raise self.fail(f"field {name}: a struct {base} is read through an array or a tag")
        if size > len(self.data):
            raise self.fail(f"{name} count {size}")
        element = base[1:-1]
        return tuple(self.value(element, version, flexible, name) for _ in range(size))

    def struct(self, schema: Schema, version: int) -> Any:
        flexible = version >= schema.flexible_from
        fields: dict[str, Any] = {}
        tags: dict[int, Field] = {}
        for f in schema.fields:
            if not f.first <= version <= f.last:
                fields[f.name] = f.default
            elif f.tag is not None:
                fields[f.name] = f.default
                tags[f.tag] = f
            elif f.kind.rstrip("?") in SCHEMAS:
                fields[f.name] = self.struct(SCHEMAS[f.kind.rstrip("?")], version)
            elif f.kind.startswith("[") and f.kind[1:-1] in SCHEMAS:
                count = self.length("array", flexible)
                if count < 0 or count > len(self.data):
                    raise self.fail(f"{f.name} count {count}")
                element = SCHEMAS[f.kind[1:-1]]
                fields[f.name] = tuple(self.struct(element, version) for _ in range(count))
            else:
                fields[f.name] = self.value(f.kind, version, flexible, f.name)
        if flexible:
            for _ in range(self.uvarint()):
                tag, size = self.uvarint(), self.uvarint()
                end = self.pos + size
                known = tags.get(tag)
                if known is None:
                    self.take(size)  # a tagged field of a later Kafka: skipped
                    continue
                fields[known.name] = self.value(known.kind, version, flexible, known.name)
                if self.pos != end:
                    raise self.fail(f"tagged field {known.name}: expected {size} bytes")
        return schema.build(**fields)

    def done(self) -> None:
        if self.pos != len(self.data):
            raise self.fail(f"expected {self.pos} bytes, found {len(self.data)}")


# -- keys and values, any schema and version --------------------------------------------------


def encode_record_key(key_type: int, key: Any) -> bytes:
    """``key`` (an object with the fields of ``KEY_TYPES[key_type]``'s schema) as a key of
    type ``key_type``."""
    out = bytearray(_INTS["int16"].pack(key_type))
    _write_struct(out, SCHEMAS[KEY_TYPES[key_type]], key_type, key)
    return bytes(out)


def encode_value(schema: str, version: int, value: Any) -> bytes:
    """``value`` as version ``version`` of ``schema`` (ValueError if the schema does not
    have that version)."""
    known = SCHEMAS[schema]
    if not known.versions[0] <= version <= known.versions[1]:
        raise ValueError(f"{schema}: expected version {known.versions}, found {version}")
    out = bytearray(_INTS["int16"].pack(version))
    _write_struct(out, known, version, value)
    return bytes(out)


def decode_record_key(data: bytes) -> tuple[int, Any]:
    """(key type, the key decoded by its schema; ``None`` for a type this reader does not
    know). Raises ``CorruptOffsetsRecordError`` if the bytes do not match the schema."""
    reader = _Reader(data, "__consumer_offsets key")
    key_type = reader.integer("int16")
    schema = KEY_TYPES.get(key_type)
    if schema is None:
        return key_type, None
    key = reader.struct(SCHEMAS[schema], key_type)
    reader.done()
    return key_type, key


def decode_value(schema: str, data: bytes) -> Any:
    """A value of ``schema``, in whichever version it announces; raises
    ``UnsupportedOffsetsRecordVersionError`` for a version the schema does not list."""
    known = SCHEMAS[schema]
    reader = _Reader(data, f"__consumer_offsets {schema}")
    version = reader.integer("int16")
    low, high = known.versions
    if not low <= version <= high:
        raise UnsupportedOffsetsRecordVersionError(
            f"{schema}: expected version {low} to {high}, found {version}"
        )
    value = reader.struct(known, version)
    reader.done()
    return value


# -- offset commits and group metadata, as Kafka 3.x writes them ------------------------------


def encode_key(key: OffsetCommitKey | GroupMetadataKey) -> bytes:
    """The key as Kafka 3.x writes it (version 1 for a commit, 2 for group metadata)."""
    if isinstance(key, OffsetCommitKey):
        return encode_record_key(OFFSET_COMMIT_KEY_VERSION, key)
    return encode_record_key(GROUP_METADATA_KEY_VERSION, key)


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """An offset-commit or group-metadata key; ``None`` for any other record type (skip the
    record). Raises ``CorruptOffsetsRecordError`` if the bytes do not match the schema."""
    _type, key = decode_record_key(data)
    return key if isinstance(key, OffsetCommitKey | GroupMetadataKey) else None


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    """Version 3, or 1 when an expire timestamp is set (Kafka's ``offsetCommitValue``)."""
    version = 1 if value.expire_timestamp != -1 else OFFSET_COMMIT_VALUE_VERSION
    return encode_value("OffsetCommitValue", version, value)


def encode_group_metadata_value(
    value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION
) -> bytes:
    """Version 3 unless told otherwise (what Kafka 3.x writes, and Burrow reads)."""
    return encode_value("GroupMetadataValue", version, value)


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    result: OffsetCommitValue = decode_value("OffsetCommitValue", data)
    return result


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    result: GroupMetadataValue = decode_value("GroupMetadataValue", data)
    return result


# -- Sluice's JSON records of before (read only, for the migration) ------------------------


def is_legacy_json(key: bytes) -> bool:
    """Whether ``key`` is one of Sluice's old JSON keys (binary keys start 0x00)."""
    return key[:1] == b"{"


def decode_legacy_key(data: bytes) -> OffsetCommitKey:
    """``{"version": 1, "group": g, "topic": t, "partition": p}``."""
    try:
        k = json.loads(data)
        return OffsetCommitKey(str(k["group"]), str(k["topic"]), int(k["partition"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptOffsetsRecordError(
            f"legacy JSON key: expected group, topic and partition, found {data[:200]!r}"
        ) from exc


def decode_legacy_value(data: bytes) -> OffsetCommitValue:
    """``{"version": 1, "offset": o, "leader_epoch": e, "metadata": m, "commit_timestamp": ms}``;
    a null metadata reads as "" (the binary schema's metadata is not nullable)."""
    try:
        v = json.loads(data)
        return OffsetCommitValue(
            int(v["offset"]),
            int(v.get("leader_epoch", -1)),
            v.get("metadata") or "",
            int(v.get("commit_timestamp", 0)),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptOffsetsRecordError(
            f"legacy JSON value: expected an offset, found {data[:200]!r}"
        ) from exc
