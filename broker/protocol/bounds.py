"""Pre-flight bounds check of a request body, before kio parses it.

Why this exists: kio's native parser reserves memory for an array from its count before reading
a single item (``Vec::with_capacity(count)``), and Rust aborts the *process* when that
allocation fails. A 6-byte Metadata request announcing 2**31 - 1 topics asks for 16 GiB and
kills the broker with ``memory allocation of 17179869176 bytes failed`` — no exception to
catch. (Checked against kio 0.6.5; see ``tests/broker/protocol/test_bounds.py``.)

So before handing a body to kio, ``check_bounds`` walks it with the same schema kio will use
(kio's dataclass fields and their ``kafka_type`` metadata, classified by kio's own
``kio.serial._introspect``) and checks every length it meets against the bytes that are left:

* an array of N items is refused unless N × (smallest encoding of one item) fits in the rest;
  so the largest reservation kio can then make is proportional to the frame, which the framing
  layer already bounded by ``socket.request.max.bytes``;
* strings and bytes must fit in the rest; tagged fields must be exactly as long as they say.

The walk reads only lengths and skips everything else; runs of fixed-size fields are merged
into one skip at compile time, and an array of fixed-size items is skipped in one step, so the
cost grows with the number of variable-size values, not with the bytes (a Produce request with
one partition of 16 KiB records is a dozen steps).

Anything the walk rejects is a ``RemoteProtocolError``. The walk does not replace kio's checks
(UTF-8 validity, enum values): it only guarantees that kio never sees an absurd count.

Thread-safety: compiled schemas are cached in a dict; compilation is idempotent, so a race
only compiles twice.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Final

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from .errors import RemoteProtocolError
from .primitives import INT16, INT32, read_uvarint

__all__ = ["check_bounds"]

# Opcodes of the compiled walk.
_FIXED: Final = 0  # arg: byte count
_LEGACY_STRING: Final = 1  # INT16 length, -1 = null
_LEGACY_BYTES: Final = 2  # INT32 length, -1 = null
_COMPACT_BYTES: Final = 3  # UNSIGNED_VARINT length + 1, 0 = null (strings and bytes alike)
_ENTITY: Final = 4  # arg: _Schema
_LEGACY_ARRAY: Final = 5  # arg: (item op, smallest item size); INT32 count, -1 = null
_COMPACT_ARRAY: Final = 6  # arg: (item op, smallest item size); UNSIGNED_VARINT count + 1

_Op = tuple[int, Any]

_FIXED_SIZES: Final = {
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}


@dataclass(frozen=True, slots=True)
class _Schema:
    ops: tuple[_Op, ...]
    flexible: bool
    nullable: bool
    tags: dict[int, _Op]
    min_size: int


_CACHE: dict[tuple[type[Any], bool], _Schema] = {}


def _primitive_op(kafka_type: str, flexible: bool, nullable: bool) -> _Op:
    """Strings and bytes carry whether they may be null: Kafka's parser rejects a null where
    the schema does not allow one ("non-nullable field was serialized as null"), and kio
    would otherwise hand a handler ``None`` where it expects a value."""
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        return (_FIXED, size)
    if kafka_type in ("string", "bytes", "records"):
        if flexible:
            return (_COMPACT_BYTES, nullable)
        return (_LEGACY_STRING, nullable) if kafka_type == "string" else (_LEGACY_BYTES, nullable)
    raise TypeError(f"unknown kafka_type {kafka_type!r}")


def _min_size(op: _Op) -> int:
    code, arg = op
    if code == _FIXED:
        return int(arg)
    if code == _LEGACY_STRING:
        return 2
    if code in (_LEGACY_BYTES, _LEGACY_ARRAY):
        return 4
    if code in (_COMPACT_BYTES, _COMPACT_ARRAY):
        return 1
    assert code == _ENTITY
    return int(arg.min_size)


def _field_op(field: dataclasses.Field[Any], flexible: bool, is_header: bool) -> _Op:
    if is_header and field.name == "client_id":
        return (_LEGACY_STRING, True)  # kio and Kafka special-case it, see headers.py
    cls = classify_field(field)
    nullable = is_optional(field)
    item: _Op
    if isinstance(cls, PrimitiveField | PrimitiveTupleField):
        # Items of a primitive array are never null; a primitive field is if its type says.
        item = _primitive_op(get_schema_field_type(field), flexible, nullable and not cls.is_array)
    elif isinstance(cls, EntityField):
        item = _simplify((_ENTITY, _compile(cls.type_, is_optional(field))))
    else:
        assert isinstance(cls, EntityTupleField)
        item = _simplify((_ENTITY, _compile(cls.type_, False)))
    if cls.is_array:
        code = _COMPACT_ARRAY if flexible else _LEGACY_ARRAY
        return (code, (item, max(_min_size(item), 1), nullable))
    return item


def _simplify(op: _Op) -> _Op:
    """An entity made only of fixed-size fields (and not flexible or nullable) is fixed-size."""
    code, arg = op
    fixed = code == _ENTITY and not arg.flexible and not arg.nullable
    if fixed and all(c == _FIXED for c, _ in arg.ops):
        return (_FIXED, sum(a for _, a in arg.ops))
    return op


def _compile(entity_type: type[Any], nullable: bool) -> _Schema:
    key = (entity_type, nullable)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    flexible = bool(entity_type.__flexible__)
    is_header = entity_type.__name__ == "RequestHeader"
    ops: list[_Op] = []
    tags: dict[int, _Op] = {}
    for field in dataclasses.fields(entity_type):
        tag = get_field_tag(field)
        op = _field_op(field, flexible, is_header)
        if tag is not None:
            tags[int(tag)] = op
        elif ops and op[0] == _FIXED and ops[-1][0] == _FIXED:
            ops[-1] = (_FIXED, ops[-1][1] + op[1])  # merge runs of fixed-size fields
        else:
            ops.append(op)
    # A nullable struct may be the null marker alone.
    min_size = 1 if nullable else sum(_min_size(op) for op in ops) + (1 if flexible else 0)
    schema = _Schema(tuple(ops), flexible, nullable, tags, min_size)
    _CACHE[key] = schema
    return schema


def check_bounds(entity_type: type[Any], buf: bytes | memoryview, pos: int) -> int:
    """Walk a body of ``entity_type`` from ``pos``; return where it ends.

    Raises ``RemoteProtocolError`` if a length or count does not fit in the bytes left.
    """
    return _walk_entity(_compile(entity_type, False), buf, pos, len(buf))


def _truncated(what: str, need: int, left: int) -> RemoteProtocolError:
    return RemoteProtocolError(f"{what} needs {need} bytes, only {left} left")


def _walk_entity(schema: _Schema, buf: bytes | memoryview, pos: int, end: int) -> int:
    if schema.nullable:
        if pos >= end:
            raise _truncated("nullable struct marker", 1, end - pos)
        marker = buf[pos]
        pos += 1
        if marker == 0xFF:  # -1: null
            return pos
    for op in schema.ops:
        pos = _walk(op, buf, pos, end)
    if schema.flexible:
        count, pos = read_uvarint(buf, pos, end)
        if count * 2 > end - pos:
            raise _truncated(f"{count} tagged fields", count * 2, end - pos)
        for _ in range(count):
            tag, pos = read_uvarint(buf, pos, end)
            size, pos = read_uvarint(buf, pos, end)
            if size > end - pos:
                raise _truncated(f"tagged field {tag}", size, end - pos)
            tag_op = schema.tags.get(tag)
            if tag_op is not None:
                stop = _walk(tag_op, buf, pos, pos + size)
                if stop != pos + size:
                    raise RemoteProtocolError(
                        f"tagged field {tag} declares {size} bytes but holds {stop - pos}"
                    )
            pos += size
    return pos


def _walk(op: _Op, buf: bytes | memoryview, pos: int, end: int) -> int:
    code, arg = op
    left = end - pos
    if code == _FIXED:
        if arg > left:
            raise _truncated("field", arg, left)
        return pos + int(arg)
    if code == _LEGACY_STRING:
        if left < 2:
            raise _truncated("string length", 2, left)
        (length,) = INT16.unpack_from(buf, pos)
        return _skip_bytes(length, pos + 2, end, "string", arg)
    if code == _LEGACY_BYTES:
        if left < 4:
            raise _truncated("bytes length", 4, left)
        (length,) = INT32.unpack_from(buf, pos)
        return _skip_bytes(length, pos + 4, end, "bytes", arg)
    if code == _COMPACT_BYTES:
        length, pos = read_uvarint(buf, pos, end)
        return _skip_bytes(length - 1, pos, end, "compact string", arg)
    if code == _ENTITY:
        return _walk_entity(arg, buf, pos, end)
    item, item_min, nullable = arg
    count: int
    if code == _LEGACY_ARRAY:
        if left < 4:
            raise _truncated("array length", 4, left)
        (count,) = INT32.unpack_from(buf, pos)
        pos += 4
        if count == -1:
            if not nullable:
                raise RemoteProtocolError(
                    "expected an array, found null (the field is not nullable)"
                )
            return pos
        if count < 0:
            raise RemoteProtocolError(f"negative array length {count}")
    else:
        count, pos = read_uvarint(buf, pos, end)
        if count == 0:
            if not nullable:
                raise RemoteProtocolError(
                    "expected an array, found null (the field is not nullable)"
                )
            return pos
        count -= 1
    if count * item_min > end - pos:
        raise RemoteProtocolError(
            f"array of {count} items needs at least {count * item_min} bytes, only {end - pos} left"
        )
    if item[0] == _FIXED:
        return pos + count * int(item[1])
    for _ in range(count):
        pos = _walk(item, buf, pos, end)
    return pos


def _skip_bytes(length: int, pos: int, end: int, what: str, nullable: bool) -> int:
    if length == -1:
        if not nullable:
            raise RemoteProtocolError(f"expected a {what}, found null (the field is not nullable)")
        return pos
    if length < 0:
        raise RemoteProtocolError(f"negative {what} length {length}")
    if length > end - pos:
        raise _truncated(what, length, end - pos)
    return pos + length
