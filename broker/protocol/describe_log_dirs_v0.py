"""DescribeLogDirs **v0** (Kafka 4.0 dropped it, KIP-896; 3.x accepts 0–4).

From Kafka 3.x's ``DescribeLogDirsRequest.json`` / ``DescribeLogDirsResponse.json``: v1 only
changes throttling ("Starting in version 1, on quota violation, brokers send out responses
before throttling"), so v0's layout is v1's::

    Request   Topics [Topic, Partitions [INT32]] nullable (null: every partition)
    Response  ThrottleTimeMs, Results [ErrorCode, LogDir,
                  Topics [Name, Partitions [PartitionIndex, PartitionSize, OffsetLag,
                                            IsFutureKey]]]

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
from kio.schema.types import TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta, i64


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribableLogDirTopicV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(35)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic: TopicName = field(metadata={"kafka_type": "string"})
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeLogDirsRequestV0:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(35)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topics: tuple[DescribableLogDirTopicV0, ...] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeLogDirsPartitionV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(35)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    partition_size: i64 = field(metadata={"kafka_type": "int64"})
    offset_lag: i64 = field(metadata={"kafka_type": "int64"})
    is_future_key: bool = field(metadata={"kafka_type": "bool"})


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeLogDirsTopicV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(35)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    partitions: tuple[DescribeLogDirsPartitionV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeLogDirsResultV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(35)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    log_dir: str = field(metadata={"kafka_type": "string"})
    topics: tuple[DescribeLogDirsTopicV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeLogDirsResponseV0:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(35)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    results: tuple[DescribeLogDirsResultV0, ...]
