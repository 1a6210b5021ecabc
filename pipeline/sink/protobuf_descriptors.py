"""Confluent's Protobuf framing and the message classes of registered ``.proto`` schemas.

The value layout (confluent-kafka's ``ProtobufSerializer``; both directions here)::

    offset  size  field
    0       1     magic byte, 0
    1       4     schema id, big-endian (the writer schema: a .proto file)
    5       ...   the message indexes: a zigzag varint count n, then n zigzag varints, the
                  path from the file's top-level messages through nested ones to the value's
                  message type; a count of 0 alone means [0], the file's first message
    ...           the message, Protobuf binary

``message_indexes`` reads the indexes, ``encode_message_indexes`` writes them (``[0]`` as the
single byte 0, as Confluent does); ``message_name`` / ``indexes_of`` map between indexes and
a message's full name. ``message_class`` builds a registered schema's message class (from its
``FileDescriptorProto`` as the registry's parser gave it, its references under the names it
imports them by, and the well-known files), once per process.

Shared by the sink (encoding) and the source (decoding; it imports the sink). Classes are
cached behind a lock; the functions are pure.
"""

from __future__ import annotations

import threading
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor

from sluice.pipeline.sink.registry_schemas import RegisteredSchema
from sluice.schemas.errors import SerdeError

__all__ = [
    "MessageIndexError",
    "UnknownMessageError",
    "encode_message_indexes",
    "indexes_of",
    "message_class",
    "message_indexes",
    "message_name",
]


class MessageIndexError(SerdeError):
    """The message-index array is cut short or names no message of the writer schema."""


class UnknownMessageError(ValueError):
    """The schema has no message of the name asked for (or none at all)."""


def _varint(data: memoryview, at: int) -> tuple[int, int]:
    """The zigzag varint at ``at`` of ``data`` and the position after it."""
    shift = result = 0
    while True:
        if at >= len(data):
            raise MessageIndexError(f"expected a varint at byte {at}, found the end")
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at
        shift += 7
        if shift > 63:
            raise MessageIndexError(f"expected a varint of at most 10 bytes before byte {at}")


def message_indexes(body: memoryview) -> tuple[list[int], memoryview]:
    """Split what follows the 5-byte header into (message indexes, message bytes)."""
    count, at = _varint(body, 0)
    if count == 0:
        return [0], body[at:]
    if count < 0 or count > 64:
        raise MessageIndexError(f"expected 0 to 64 message indexes, found a count of {count}")
    indexes = []
    for _ in range(count):
        index, at = _varint(body, at)
        indexes.append(index)
    return indexes, body[at:]


def _pool(registered: RegisteredSchema) -> tuple[descriptor_pool.DescriptorPool, str]:
    """A pool with ``registered``'s file, its references (under the names it imports them by)
    and the well-known files they import; the file's name in it."""
    from google.protobuf import descriptor_pool as pools

    from sluice.schemas.protobuf_schema import ProtobufSchema

    default = pools.Default()
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(file: descriptor_pb2.FileDescriptorProto) -> None:
        for dependency in file.dependency:
            if dependency not in added and dependency not in names:
                known = descriptor_pb2.FileDescriptorProto()
                default.FindFileByName(dependency).CopyToProto(known)  # a well-known file
                add(known)
        if file.name not in added:
            pool.Add(file)
            added.add(file.name)

    files = []
    for ref in registered.references:
        assert isinstance(ref.schema, ProtobufSchema)
        file = descriptor_pb2.FileDescriptorProto()
        file.CopyFrom(ref.schema.file)
        file.name = ref.name
        files.append(file)
    schema = registered.schema
    assert isinstance(schema, ProtobufSchema)
    main = descriptor_pb2.FileDescriptorProto()
    main.CopyFrom(schema.file)
    main.name = main.name or "schema.proto"
    names = {f.name for f in files}
    for file in [*files, main]:
        add(file)
    return pool, main.name


_CLASSES: dict[tuple[int, str], Any] = {}
_CLASSES_LOCK = threading.Lock()


def message_class(registered: RegisteredSchema, full_name: str | None) -> Any:
    """The message class of ``full_name`` (``None``: the file's first message) in
    ``registered``, built once per process."""
    key = (id(registered), full_name or "")
    with _CLASSES_LOCK:
        found = _CLASSES.get(key)
        if found is None:
            pool, file_name = _pool(registered)
            file = pool.FindFileByName(file_name)
            if full_name is None:
                if not file.message_types_by_name:
                    raise UnknownMessageError(
                        f"schema id {registered.schema_id}: expected a message, found none"
                    )
                descriptor = next(iter(file.message_types_by_name.values()))
            else:
                try:
                    descriptor = pool.FindMessageTypeByName(full_name)
                except KeyError:
                    raise UnknownMessageError(
                        f"valueSchemaMessage: expected a message of schema id "
                        f"{registered.schema_id}, found no {full_name!r} in it"
                    ) from None
            found = _CLASSES[key] = (registered, message_factory.GetMessageClass(descriptor))
        return found[1]


def message_name(registered: RegisteredSchema, indexes: list[int]) -> str:
    """The full name of the message ``indexes`` name in ``registered``."""
    from sluice.schemas.protobuf_schema import ProtobufSchema

    schema = registered.schema
    assert isinstance(schema, ProtobufSchema)
    scope = schema.file.package
    messages = schema.file.message_type
    name = ""
    for depth, index in enumerate(indexes):
        if not 0 <= index < len(messages):
            raise MessageIndexError(
                f"message indexes {indexes}: expected index {depth} within [0, {len(messages)}) "
                f"of schema id {registered.schema_id}, found {index}"
            )
        message = messages[index]
        name = f"{scope}.{message.name}" if scope else message.name
        scope, messages = name, message.nested_type
    return name


def _zigzag(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_message_indexes(indexes: list[int]) -> bytes:
    """The message-index array of ``indexes``: ``[0]`` is the single byte 0."""
    if indexes == [0]:
        return b"\x00"
    return _zigzag(len(indexes)) + b"".join(_zigzag(i) for i in indexes)


def indexes_of(message: Descriptor) -> list[int]:
    """The message indexes of ``message`` in its file (the path through nested types)."""
    path: list[int] = []
    current: Descriptor | None = message
    while current is not None:
        parent = current.containing_type
        siblings = (
            parent.nested_types
            if parent is not None
            else list(current.file.message_types_by_name.values())
        )
        path.append(list(siblings).index(current))
        current = parent
    return path[::-1]
