"""ListOffsets responses (v1–v8) as the broker answers them, encoded by hand.

A wide load plans its partitions with two ListOffsets requests (earliest and latest) of every
partition a broker leads: 800 partitions for 200 topics of 4. Building kio dataclasses from
dicts for them and writing those with kio's generic encoder took most of the broker's time for
such a request; the layout is small and fixed, so it is written out here (as
``replica_fetch_request`` is for the follower's Fetch) and tested byte for byte against kio.
Version 0 (a list of old-style offsets per partition) stays on kio's path
(``list_offsets_v0``): only old clients send it.

Frame, v1–v5 (not flexible; response header v0)::

    Size                 int32 (of what follows)
    CorrelationId        int32
    ThrottleTimeMs       int32                       v2+
    [Topics]             int32 count, each:
        Name             string (int16 length, UTF-8)
        [Partitions]     int32 count, each:
            PartitionIndex   int32
            ErrorCode        int16
            Timestamp        int64
            Offset           int64
            LeaderEpoch      int32                   v4+

Frame, v6–v8 (flexible: v5's fields; response header v1)::

    Size                 int32 (of what follows)
    CorrelationId        int32
    TaggedFields         uvarint 0 (none)
    ThrottleTimeMs       int32
    [Topics]             uvarint count + 1, each:
        Name             uvarint length + 1, UTF-8
        [Partitions]     uvarint count + 1, each:
            PartitionIndex int32, ErrorCode int16, Timestamp int64, Offset int64,
            LeaderEpoch int32, TaggedFields uvarint 0
        TaggedFields     uvarint 0
    TaggedFields         uvarint 0

v7 (MAX_TIMESTAMP, KIP-734) and v8 (EARLIEST_LOCAL, KIP-405) change only what a request may
ask, not the response. A value that does not fit its field raises ``LocalProtocolError``, as
kio's encoder does (through ``codec``).

Pure functions; thread-safe.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final, NamedTuple

from .errors import LocalProtocolError
from .primitives import NO_TAGS, write_compact_length

__all__ = ["PartitionOffset", "encode_list_offsets_response", "VERSIONS"]

#: The versions written here; v0 goes through kio (``list_offsets_v0``).
VERSIONS: Final = range(1, 9)
_FIRST_THROTTLE: Final = 2
_FIRST_LEADER_EPOCH: Final = 4
_FIRST_FLEXIBLE: Final = 6

_H: Final = struct.Struct(">h")
_I: Final = struct.Struct(">i")
_II: Final = struct.Struct(">ii")  # correlation id, throttle time
_HEAD_FLEXIBLE: Final = struct.Struct(">iBi")  # correlation id, no tagged fields, throttle time
_PARTITION_V1: Final = struct.Struct(">ihqq")
_PARTITION_V4: Final = struct.Struct(">ihqqi")
_PARTITION_V6: Final = struct.Struct(">ihqqiB")  # + no tagged fields


class PartitionOffset(NamedTuple):
    """One partition of the answer; -1 is "none" for timestamp, offset and leader epoch."""

    partition_index: int
    error_code: int
    timestamp: int
    offset: int
    leader_epoch: int


def encode_list_offsets_response(
    correlation_id: int,
    version: int,
    topics: Sequence[tuple[str, Sequence[PartitionOffset]]],
    *,
    throttle_time_ms: int = 0,
) -> bytes:
    """The whole frame (module docstring), size prefix included, of a ListOffsets response at
    ``version`` (1–8) answering the request ``correlation_id``; ``topics`` in the order given.
    Below v2 there is no throttle time and ``throttle_time_ms`` is not written; below v4 no
    leader epoch."""
    if version not in VERSIONS:
        raise LocalProtocolError(f"expected a ListOffsets response version 1-8, found v{version}")
    try:
        if version >= _FIRST_FLEXIBLE:
            out = _flexible(correlation_id, throttle_time_ms, topics)
        else:
            out = _classic(correlation_id, version, throttle_time_ms, topics)
    except struct.error as exc:  # a value out of its field's range: our bug, not the peer's
        raise LocalProtocolError(
            f"expected ListOffsets v{version} values that fit their fields, found one that "
            f"does not: {exc}"
        ) from exc
    _I.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def _classic(
    correlation_id: int,
    version: int,
    throttle_time_ms: int,
    topics: Sequence[tuple[str, Sequence[PartitionOffset]]],
) -> bytearray:
    out = bytearray(4)  # size prefix, patched by the caller
    if version >= _FIRST_THROTTLE:
        out += _II.pack(correlation_id, throttle_time_ms)
    else:
        out += _I.pack(correlation_id)
    out += _I.pack(len(topics))
    with_epoch = version >= _FIRST_LEADER_EPOCH
    pack = _PARTITION_V4.pack if with_epoch else _PARTITION_V1.pack
    for name, partitions in topics:
        raw = name.encode("utf-8")
        out += _H.pack(len(raw))
        out += raw
        out += _I.pack(len(partitions))
        if with_epoch:
            for p in partitions:
                out += pack(*p)
        else:
            for index, error_code, timestamp, offset, _epoch in partitions:
                out += pack(index, error_code, timestamp, offset)
    return out


def _flexible(
    correlation_id: int,
    throttle_time_ms: int,
    topics: Sequence[tuple[str, Sequence[PartitionOffset]]],
) -> bytearray:
    out = bytearray(4)  # size prefix, patched by the caller
    out += _HEAD_FLEXIBLE.pack(correlation_id, 0, throttle_time_ms)
    out += write_compact_length(len(topics))
    pack = _PARTITION_V6.pack
    for name, partitions in topics:
        raw = name.encode("utf-8")
        out += write_compact_length(len(raw))
        out += raw
        out += write_compact_length(len(partitions))
        for index, error_code, timestamp, offset, epoch in partitions:
            out += pack(index, error_code, timestamp, offset, epoch, 0)
        out += NO_TAGS
    out += NO_TAGS
    return out
