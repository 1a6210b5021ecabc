"""DescribeConfigs **v0** (Kafka 4.0 dropped it, KIP-896; 3.x accepts 0–4).

From Kafka 3.x's ``DescribeConfigsRequest.json`` / ``DescribeConfigsResponse.json``
("Version 1 adds IncludeSynonyms" / "Version 1 adds ConfigSource and the synonyms")::

    Request   Resources [ResourceType INT8, ResourceName, ConfigurationKeys [STRING] nullable]
    Response  ThrottleTimeMs, Results [ErrorCode, ErrorMessage, ResourceType, ResourceName,
                                       Configs [Name, Value, ReadOnly, IsDefault BOOL,
                                                IsSensitive]]

v0 has ``IsDefault`` where v1+ has ``ConfigSource``: a config is default when its source is
DEFAULT_CONFIG (5), as Kafka's v0 response says.

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
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32Timedelta


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResourceV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(32)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    resource_type: i8 = field(metadata={"kafka_type": "int8"})
    resource_name: str = field(metadata={"kafka_type": "string"})
    configuration_keys: tuple[str, ...] | None = field(
        metadata={"kafka_type": "string"}, default=()
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsRequestV0:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(32)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    resources: tuple[DescribeConfigsResourceV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResourceResultV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(32)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: str = field(metadata={"kafka_type": "string"})
    value: str | None = field(metadata={"kafka_type": "string"})
    read_only: bool = field(metadata={"kafka_type": "bool"})
    is_default: bool = field(metadata={"kafka_type": "bool"})
    is_sensitive: bool = field(metadata={"kafka_type": "bool"})


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResultV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(32)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"})
    resource_type: i8 = field(metadata={"kafka_type": "int8"})
    resource_name: str = field(metadata={"kafka_type": "string"})
    configs: tuple[DescribeConfigsResourceResultV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResponseV0:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(32)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    results: tuple[DescribeConfigsResultV0, ...]
