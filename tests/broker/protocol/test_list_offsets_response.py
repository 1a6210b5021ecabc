"""The hand-written ListOffsets response (v1-v8) against kio's encoding through ``respond``,
byte for byte, and as kio decodes it."""

import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.broker.protocol import Request, decode_response
from sluice.broker.protocol.apis import APIS, ApiKey, request_header_version
from sluice.broker.protocol.errors import Errors, LocalProtocolError
from sluice.broker.protocol.headers import RequestHeader
from sluice.broker.protocol.list_offsets_response import (
    VERSIONS,
    PartitionOffset,
    encode_list_offsets_response,
)
from sluice.broker.server.responses import respond

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(alphabet="abcXYZ09._-é数🙂", min_size=1, max_size=12)
partitions = st.lists(
    st.builds(
        PartitionOffset,
        INT32,
        st.sampled_from(list(Errors)),
        st.one_of(st.just(-1), INT64),
        st.one_of(st.just(-1), INT64),
        st.one_of(st.just(-1), INT32),
    ),
    max_size=4,
)
topics = st.lists(st.tuples(names, partitions), max_size=4)


def _request(version: int, correlation_id: int) -> Request:
    header_version = request_header_version(ApiKey.LIST_OFFSETS, version)
    return Request(
        RequestHeader(ApiKey.LIST_OFFSETS, version, correlation_id, "c", header_version), None
    )


def _kio(version: int, correlation_id: int, throttle: int, topic_list: Any) -> bytes:
    """What the handler answered before: the dicts it built, through ``respond``."""
    return respond(
        _request(version, correlation_id),
        {"throttle_time": throttle, "topics": [
            {"name": name, "partitions": [
                {"partition_index": p.partition_index, "error_code": p.error_code,
                 "timestamp": p.timestamp, "offset": p.offset, "leader_epoch": p.leader_epoch,
                 "old_style_offsets": []} for p in ps]}
            for name, ps in topic_list]},
    )  # fmt: skip


def _decoded(frame: bytes, version: int) -> tuple[int, int | None, list[Any]]:
    correlation_id, body = decode_response(frame[4:], ApiKey.LIST_OFFSETS, version)
    throttle = getattr(body, "throttle_time", None)
    if isinstance(throttle, datetime.timedelta):
        throttle = throttle // datetime.timedelta(milliseconds=1)  # exact, no float
    found = [
        (t.name, [(p.partition_index, int(p.error_code), p.timestamp, p.offset,
                   getattr(p, "leader_epoch", -1)) for p in t.partitions])
        for t in body.topics
    ]  # fmt: skip
    return correlation_id, throttle, found


def _expected_values(version: int, topic_list: Any) -> list[Any]:
    # Below v4 the response has no leader epoch: it reads back as absent (-1 here).
    return [
        (name, [(p.partition_index, int(p.error_code), p.timestamp, p.offset,
                 p.leader_epoch if version >= 4 else -1) for p in ps])
        for name, ps in topic_list
    ]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(list(VERSIONS)), st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1),
       topics)  # fmt: skip
def test_encode_matches_kio(version, correlation_id, throttle, topic_list):
    found = encode_list_offsets_response(
        correlation_id, version, topic_list, throttle_time_ms=throttle
    )
    assert found == _kio(version, correlation_id, throttle, topic_list)
    decoded_id, decoded_throttle, values = _decoded(found, version)
    assert decoded_id == correlation_id
    assert decoded_throttle == (throttle if version >= 2 else None)
    assert values == _expected_values(version, topic_list)


@pytest.mark.parametrize("version", list(VERSIONS))
def test_a_wide_answer_matches_kio(version):
    # 200 topics of 4 partitions, as a wide load plans: counts and a topic name past 127 bytes
    # take more than one byte of uvarint in the flexible versions.
    topic_list = [
        (("t" * 200 if i == 0 else f"topic-é-{i}"),
         [PartitionOffset(p, Errors.NONE, -1, i * 1000 + p, 7) for p in range(4)])
        for i in range(200)
    ]  # fmt: skip
    topic_list.append(("many", [PartitionOffset(p, Errors.NONE, -1, p, -1) for p in range(300)]))
    found = encode_list_offsets_response(9, version, topic_list)
    assert found == _kio(version, 9, 0, topic_list)
    assert _decoded(found, version)[2] == _expected_values(version, topic_list)


@pytest.mark.parametrize("version", [0, 9, -1])
def test_a_version_outside_v1_v8_is_refused(version):
    with pytest.raises(LocalProtocolError, match=f"found v{version}"):
        encode_list_offsets_response(1, version, [])


@pytest.mark.parametrize(
    "partition",
    [
        PartitionOffset(2**31, Errors.NONE, -1, -1, -1),
        PartitionOffset(0, Errors.NONE, -1, 2**63, -1),
        PartitionOffset(0, Errors.NONE, -1, -1, -(2**31) - 1),
    ],
)
def test_a_value_out_of_its_field_is_refused(partition):
    for version in (4, 6):
        with pytest.raises(LocalProtocolError, match="fit their fields"):
            encode_list_offsets_response(1, version, [("t", [partition])])


def test_list_offsets_is_handled_from_v0_so_no_answer_needs_down_converting() -> None:
    """The handler writes v1+ answers by hand at the request's version; were v0 ever
    up-converted (as Kafka 4.0 dropped it), its answer would need kio's down-conversion."""
    assert APIS[ApiKey.LIST_OFFSETS].handler_min == 0
