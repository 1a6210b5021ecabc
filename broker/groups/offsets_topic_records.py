"""The records of ``__consumer_offsets`` in Kafka's binary schemas (``OffsetCommitKey/Value``,
``GroupMetadataKey/Value``, Kafka's ``group-coordinator/src/main/resources/common/message``),
so tools that read the topic directly — lag checkers, ``kafka-console-consumer`` with Kafka's
``OffsetsMessageFormatter`` / ``GroupMetadataMessageFormatter`` — decode it.

Every key and value starts with its schema version, an INT16 (big-endian). Strings are an
INT16 length then UTF-8 (length -1: null, only where "nullable"); BYTES an INT32 length then
the bytes; arrays an INT32 count then the elements. Versions 0–3 are not "flexible" (no
tagged fields); version 4, which only Kafka 4 readers know, is refused here::

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

A null value is a tombstone: the offset (or the group) was deleted. What is written is what
Kafka 3.x writes: key version 1, OffsetCommitValue v3 (v1 when an expire timestamp is set),
key version 2, GroupMetadataValue v3. A key version above 2 (a record type of a newer Kafka)
decodes to ``None`` and is skipped by readers, as Kafka's loader skips unknown keys.

Before these, Sluice wrote JSON records (``{"version": 1, "group": …}``). Such a log is
migrated, not refused (see ``sluice.broker.groups.offset_store``): :func:`is_legacy_json`
tells them apart — a JSON key starts with ``{`` (0x7B), a binary key with a small version —
and :func:`decode_legacy_key` / :func:`decode_legacy_value` read them.

The schemas are data (``_FIELDS``); one reader and one writer walk them. Pure; thread-safe.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3
MAX_VALUE_VERSION = 3


class CorruptOffsetsRecordError(ValueError):
    """A ``__consumer_offsets`` key or value is shorter or longer than its schema says, or
    is not what its version announces."""


class UnsupportedOffsetsRecordVersionError(CorruptOffsetsRecordError):
    """A value's schema version is one this reader does not know (Kafka 4's flexible v4)."""


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


# -- the schemas, as data: (field, type, first version, last version) -----------------------

_ALL = 99
_Field = tuple[str, str, int, int]
_FIELDS: dict[str, tuple[_Field, ...]] = {
    "OffsetCommitKey": (
        ("group", "string", 0, _ALL),
        ("topic", "string", 0, _ALL),
        ("partition", "int32", 0, _ALL),
    ),
    "GroupMetadataKey": (("group", "string", 0, _ALL),),
    "OffsetCommitValue": (
        ("offset", "int64", 0, _ALL),
        ("leader_epoch", "int32", 3, _ALL),
        ("metadata", "string", 0, _ALL),
        ("commit_timestamp", "int64", 0, _ALL),
        ("expire_timestamp", "int64", 1, 1),
    ),
    "GroupMetadataValue": (
        ("protocol_type", "string", 0, _ALL),
        ("generation", "int32", 0, _ALL),
        ("protocol", "string?", 0, _ALL),
        ("leader", "string?", 0, _ALL),
        ("current_state_timestamp", "int64", 2, _ALL),
        ("members", "[MemberMetadata]", 0, _ALL),
    ),
    "MemberMetadata": (
        ("member_id", "string", 0, _ALL),
        ("group_instance_id", "string?", 3, _ALL),
        ("client_id", "string", 0, _ALL),
        ("client_host", "string", 0, _ALL),
        ("rebalance_timeout", "int32", 1, _ALL),
        ("session_timeout", "int32", 0, _ALL),
        ("subscription", "bytes", 0, _ALL),
        ("assignment", "bytes", 0, _ALL),
    ),
}
# What a field absent from an old version reads as (Kafka's schema defaults).
_DEFAULTS: dict[str, Any] = {
    "leader_epoch": -1,
    "expire_timestamp": -1,
    "current_state_timestamp": -1,
    "group_instance_id": None,
    "rebalance_timeout": None,  # filled from session_timeout, as Kafka's loader does
}
_INTS = {"int16": struct.Struct(">h"), "int32": struct.Struct(">i"), "int64": struct.Struct(">q")}


def _write(out: bytearray, schema: str, version: int, obj: Any) -> None:
    for name, kind, first, last in _FIELDS[schema]:
        if not first <= version <= last:
            continue
        value = getattr(obj, name)
        if kind in _INTS:
            out += _INTS[kind].pack(value)
        elif kind in ("string", "string?"):
            if value is None:
                if kind == "string":
                    raise ValueError(f"{schema}.{name}: expected a string, found None")
                out += _INTS["int16"].pack(-1)
            else:
                data = value.encode()
                out += _INTS["int16"].pack(len(data)) + data
        elif kind == "bytes":
            out += _INTS["int32"].pack(len(value)) + value
        else:  # an array of structs
            element = kind[1:-1]
            out += _INTS["int32"].pack(len(value))
            for item in value:
                _write(out, element, version, item)


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = data, 0, what

    def take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise CorruptOffsetsRecordError(
                f"{self.what}: expected {size} more bytes at byte {self.pos}, "
                f"found {len(self.data) - self.pos}"
            )
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def integer(self, kind: str) -> int:
        fmt = _INTS[kind]
        (value,) = fmt.unpack(self.take(fmt.size))
        return int(value)

    def read(self, schema: str, version: int) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        for name, kind, first, last in _FIELDS[schema]:
            if not first <= version <= last:
                fields[name] = _DEFAULTS.get(name)
            elif kind in _INTS:
                fields[name] = self.integer(kind)
            elif kind in ("string", "string?"):
                size = self.integer("int16")
                if size == -1 and kind == "string?":
                    fields[name] = None
                else:
                    try:
                        fields[name] = self.take(size).decode()
                    except UnicodeDecodeError as exc:
                        raise CorruptOffsetsRecordError(
                            f"{self.what}: field {name} is not UTF-8: {exc}"
                        ) from exc
            elif kind == "bytes":
                fields[name] = self.take(self.integer("int32"))
            else:
                element = kind[1:-1]
                count = self.integer("int32")
                if count < 0 or count > len(self.data):
                    raise CorruptOffsetsRecordError(f"{self.what}: {name} count {count}")
                fields[name] = tuple(
                    _struct(element, self.read(element, version)) for _ in range(count)
                )
        return fields

    def done(self) -> None:
        if self.pos != len(self.data):
            raise CorruptOffsetsRecordError(
                f"{self.what}: expected {self.pos} bytes, found {len(self.data)}"
            )


def _struct(schema: str, fields: dict[str, Any]) -> Any:
    if schema == "MemberMetadata":
        if fields["rebalance_timeout"] is None:
            fields["rebalance_timeout"] = fields["session_timeout"]
        return MemberMetadata(**fields)
    return {
        "OffsetCommitKey": OffsetCommitKey,
        "GroupMetadataKey": GroupMetadataKey,
        "OffsetCommitValue": OffsetCommitValue,
        "GroupMetadataValue": GroupMetadataValue,
    }[schema](**fields)


# -- keys ---------------------------------------------------------------------------------


def encode_key(key: OffsetCommitKey | GroupMetadataKey) -> bytes:
    """The key as Kafka 3.x writes it (version 1 for a commit, 2 for group metadata)."""
    if isinstance(key, OffsetCommitKey):
        version, schema = OFFSET_COMMIT_KEY_VERSION, "OffsetCommitKey"
    else:
        version, schema = GROUP_METADATA_KEY_VERSION, "GroupMetadataKey"
    out = bytearray(_INTS["int16"].pack(version))
    _write(out, schema, version, key)
    return bytes(out)


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """A binary key; ``None`` for a key version this reader does not know (skip the record).
    Raises ``CorruptOffsetsRecordError`` if the bytes do not match the version's schema."""
    reader = _Reader(data, "__consumer_offsets key")
    version = reader.integer("int16")
    if version in (0, 1):
        schema = "OffsetCommitKey"
    elif version == 2:
        schema = "GroupMetadataKey"
    else:
        return None
    key: OffsetCommitKey | GroupMetadataKey = _struct(schema, reader.read(schema, version))
    reader.done()
    return key


# -- values -------------------------------------------------------------------------------


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    """Version 3, or 1 when an expire timestamp is set (Kafka's ``offsetCommitValue``)."""
    version = 1 if value.expire_timestamp != -1 else OFFSET_COMMIT_VALUE_VERSION
    out = bytearray(_INTS["int16"].pack(version))
    _write(out, "OffsetCommitValue", version, value)
    return bytes(out)


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    out = bytearray(_INTS["int16"].pack(GROUP_METADATA_VALUE_VERSION))
    _write(out, "GroupMetadataValue", GROUP_METADATA_VALUE_VERSION, value)
    return bytes(out)


def _decode_value(data: bytes, schema: str) -> Any:
    reader = _Reader(data, f"__consumer_offsets {schema}")
    version = reader.integer("int16")
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise UnsupportedOffsetsRecordVersionError(
            f"{schema}: expected version 0 to {MAX_VALUE_VERSION}, found {version}"
        )
    value = _struct(schema, reader.read(schema, version))
    reader.done()
    return value


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    result: OffsetCommitValue = _decode_value(data, "OffsetCommitValue")
    return result


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    result: GroupMetadataValue = _decode_value(data, "GroupMetadataValue")
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
