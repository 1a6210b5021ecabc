"""Sluice's sans-IO Kafka codec: bytes in, requests out; responses in, bytes out.

No sockets and no asyncio here: the server (``broker/server``) reads from the network, feeds
``FrameDecoder``, decodes each frame with ``decode_request``, and writes what
``encode_response`` / ``encode_fetch_response`` return.

Modules, each named after what it holds:

- ``errors``          protocol errors (local vs remote) and ``Errors``, the Kafka error codes
- ``primitives``      the few wire primitives the codec handles by hand (varints, tagged fields)
- ``framing``         ``FrameDecoder``: size-prefixed frames out of a byte stream
- ``headers``         request header v1/v2, response header v0/v1
- ``apis``            the dispatch table: APIs, implemented and advertised versions, kio schemas
- ``bounds``          pre-flight check of array counts before kio allocates
- ``codec``           ``decode_request``, ``encode_response``, the UNSUPPORTED_VERSION answer
- ``produce_codec``   Produce by hand (the hot path), v0–2's message sets up-converted
- ``fetch_response``  the zero-copy Fetch response encoder (v0–3: down-converted, in memory)
- ``replica_fetch_request``   a follower's Fetch v11 request by hand (hundreds of partitions)
- ``list_offsets_response``   ListOffsets v1–8 answers by hand (a wide load's plan: 800 partitions)
- ``legacy``          up-/down-conversion of the versions Kafka 4.0 dropped (KIP-896)
- ``*_v0*``           those versions' schemas in kio's shape (``list_offsets_v0``, ``fetch_v0_3``…)
"""

from .apis import APIS, ApiKey, ApiSpec, supported_api_versions
from .codec import (
    Request,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    encode_unsupported_version,
)
from .errors import (
    Errors,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    UnsupportedVersion,
    for_code,
)
from .fetch_response import (
    EncodedFetchResponse,
    FetchPartition,
    FetchTopic,
    encode_fetch_response,
)
from .framing import DEFAULT_MAX_REQUEST_BYTES, NEED_DATA, FrameDecoder, NeedData
from .headers import RequestHeader

__all__ = [
    "APIS",
    "ApiKey",
    "ApiSpec",
    "DEFAULT_MAX_REQUEST_BYTES",
    "EncodedFetchResponse",
    "Errors",
    "FetchPartition",
    "FetchTopic",
    "FrameDecoder",
    "LocalProtocolError",
    "NEED_DATA",
    "NeedData",
    "ProtocolError",
    "RemoteProtocolError",
    "Request",
    "RequestHeader",
    "UnsupportedVersion",
    "decode_request",
    "decode_response",
    "encode_fetch_response",
    "encode_request",
    "encode_response",
    "encode_unsupported_version",
    "for_code",
    "supported_api_versions",
]
