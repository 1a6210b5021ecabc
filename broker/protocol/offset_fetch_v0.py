"""OffsetFetch **v0** (Kafka 4.0 dropped it, KIP-896; 3.x accepts 0–9).

From Kafka 3.x's ``OffsetFetchRequest.json`` / ``OffsetFetchResponse.json``: "In version 0,
the request read offsets from ZK. Starting in version 1, the broker supports fetching offsets
from the internal __consumer_offsets topic." The layout is v1's::

    Request   GroupId, Topics [Name, PartitionIndexes [INT32]]
    Response  Topics [Name, Partitions [PartitionIndex, CommittedOffset, Metadata, ErrorCode]]

Sluice has no ZooKeeper offsets store: v0 reads the same committed offsets as v1.

Written in kio's shape (frozen slotted dataclasses, ``kafka_type`` field metadata, the
``__api_key__``/``__version__``/``__flexible__`` class variables) from kio's lowest generated
version, one class per version (suffix ``V<n>``), so kio's reader and writer and
``bounds.check_bounds`` handle them like generated schemas. ``apis._LEGACY`` lists them;
``legacy.py`` up-converts the requests to the lowest version the handlers see and
down-converts the responses. No ``from __future__ import annotations``: kio reads the field
types off the dataclass fields. Pure; thread-safe.
"""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader
from kio.schema.types import GroupId, TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchRequestTopicV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(9)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    partition_indexes: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchRequestV0:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(9)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    topics: tuple[OffsetFetchRequestTopicV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchResponsePartitionV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(9)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    committed_offset: i64 = field(metadata={"kafka_type": "int64"})
    metadata: str | None = field(metadata={"kafka_type": "string"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchResponseTopicV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(9)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    partitions: tuple[OffsetFetchResponsePartitionV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchResponseV0:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(9)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topics: tuple[OffsetFetchResponseTopicV0, ...]
