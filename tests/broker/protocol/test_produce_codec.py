"""The hand-written Produce codec against kio, byte for byte, for v0–9 (v9: flexible); v0–2's
message sets up-converted to one record batch."""

import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice.broker.protocol import (
    RemoteProtocolError,
    decode_request,
    encode_request,
    encode_response,
)
from sluice.broker.protocol.apis import request_type, response_type
from sluice.broker.protocol.build import build
from sluice.broker.protocol.headers import RequestHeader
from sluice.broker.protocol.produce_codec import (
    PartitionResult,
    decode_produce_body,
    encode_produce_response,
)

names = st.text(alphabet="abcdefghij._-", min_size=1, max_size=10)
partitions = st.lists(
    st.tuples(st.integers(0, 100), st.one_of(st.none(), st.binary(max_size=40))), max_size=3
)
topics = st.lists(st.tuples(names, partitions), max_size=3)


def _kio_request(version, tx, acks, timeout, topic_list):
    return build(
        request_type(0, version),
        {
            "transactional_id": tx,
            "acks": acks,
            "timeout": timeout,
            "topic_data": [
                {"name": n, "partition_data": [{"index": i, "records": r} for i, r in ps]}
                for n, ps in topic_list
            ],
        },
    )


@given(
    st.integers(3, 9),
    st.one_of(st.none(), names),
    st.sampled_from([0, 1, -1]),
    st.integers(0, 2**31 - 1),
    topics,
)
def test_decode_matches_kio(version, tx, acks, timeout, topic_list):
    frame = encode_request(7, "client", _kio_request(version, tx, acks, timeout, topic_list))[4:]
    request = decode_request(frame)
    # decode_request routes Produce to the hand-written decoder; compare with the input.
    body = request.body
    assert (body.transactional_id, body.acks, body.timeout) == (
        tx, acks, datetime.timedelta(milliseconds=timeout),
    )  # fmt: skip
    got = [
        (t.name, [(p.index, None if p.records is None else bytes(p.records))
                  for p in t.partition_data])
        for t in body.topic_data
    ]  # fmt: skip
    assert got == [(n, list(ps)) for n, ps in topic_list]


@given(
    st.integers(0, 9),
    st.lists(
        st.tuples(
            names,
            st.lists(
                st.tuples(
                    st.integers(0, 100),
                    st.sampled_from([0, 2, 45]),
                    st.integers(-1, 2**40),
                    st.sampled_from([-1, 1_700_000_000_000]),
                    st.one_of(st.none(), st.text(max_size=20)),
                ),
                max_size=3,
            ),
        ),
        max_size=3,
    ),
)
def test_encode_matches_kio(version, results):
    header = RequestHeader(api_key=0, api_version=version, correlation_id=99, client_id="c")
    ours = encode_produce_response(
        99,
        version,
        [(n, [PartitionResult(i, e, o, t, o, m) for i, e, o, t, m in ps]) for n, ps in results],
    )
    kio = encode_response(
        header,
        build(
            response_type(0, version),
            {
                "responses": [
                    {
                        "name": n,
                        "partition_responses": [
                            {"index": i, "error_code": e, "base_offset": o,
                             "log_append_time": t, "log_start_offset": o,
                             "record_errors": [], "error_message": m}
                            for i, e, o, t, m in ps
                        ],
                    }
                    for n, ps in results
                ],
                "throttle_time": 0,
            },
        ),
    )  # fmt: skip
    assert ours == kio


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"\xff\xff\x00\x01",  # truncated after acks
        b"\xff\xff\x00\x01\x00\x00\x75\x30\x7f\xff\xff\xff",  # absurd topic count
        b"\xff\xff\x00\x01\x00\x00\x75\x30\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01"
        b"\x00\x00\x00\x00\x00\x00\x10\x00",  # records longer than the frame
    ],
)
def test_garbage_is_a_remote_protocol_error(body):
    with pytest.raises(RemoteProtocolError):
        decode_produce_body(memoryview(body), 0)


def _header_end(version):
    """Where the body starts: request header v1, or v2 (its empty tags) from v9."""
    return 8 + 2 + len("client") + (1 if version >= 9 else 0)


@given(st.integers(0, 9), st.one_of(st.none(), names), topics)
def test_every_truncation_is_a_remote_protocol_error(version, tx, topic_list):
    frame = encode_request(7, "client", _kio_request(version, tx, 1, 30_000, topic_list))[4:]
    header_end = _header_end(version)
    for cut in range(header_end, len(frame)):
        with pytest.raises(RemoteProtocolError):
            decode_produce_body(frame[:cut], header_end, version)


@pytest.mark.parametrize("version", [8, 9])
def test_bytes_and_views_decode_alike_records_zero_copy(version):
    records = bytes(range(200))
    kio = _kio_request(version, "tx", -1, 1500, [("t", [(4, records), (5, None)])])
    frame = encode_request(7, "client", kio)[4:]
    pos = _header_end(version)
    for data in (frame, memoryview(frame)):
        body = decode_produce_body(data, pos, version)
        assert (body.transactional_id, body.acks, body.timeout_ms) == ("tx", -1, 1500)
        assert body.timeout == datetime.timedelta(milliseconds=1500)
        (topic,) = body.topic_data
        assert topic.name == "t"
        with_records, without = topic.partition_data
        assert (with_records.index, without.index, without.records) == (4, 5, None)
        assert isinstance(with_records.records, memoryview)
        assert with_records.records.obj is frame  # a view of the frame, not a copy
        assert bytes(with_records.records) == records


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"\xff\xfe", "transactional id length: expected >= -1, found -2"),
        (b"\x00\x02\xc3\x28" + bytes(10), "transactional id is not UTF-8"),
        (b"\xff\xff\x00\x01\x00\x00\x75\x30\x00\x00\x00\x01\xff\xff\x00\x00\x00\x00",
         "topic name length: expected >= 0, found -1"),
        (b"\xff\xff\x00\x01\x00\x00\x75\x30\x00\x00\x00\x01\x00\x03ab\x00\x00\x00",
         "topic name and partition count needs 7 bytes, 5 left"),
        (b"\xff\xff\x00\x01\x00\x00\x75\x30\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01"
         b"\x00\x00\x00\x00\xff\xff\xff\xfe", "records size: expected >= -1, found -2"),
        (b"\xff\xff\x00\x01\x00\x00\x75\x30\x00\x00\x00\x01\x00\x01t\x7f\xff\xff\xff",
         "partitions: 2147483647 items cannot fit"),
    ],
)  # fmt: skip
def test_errors_say_what_was_expected_and_found(body, message):
    with pytest.raises(RemoteProtocolError, match=message):
        decode_produce_body(body, 0)


def _legacy_set(magic, codec, n):
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(n):
        builder.append(i, timestamp=1_700_000_000_000 + i if magic else None,
                       key=None if i % 2 else b"k%d" % i, value=b"v" * i)  # fmt: skip
    return bytes(builder.build())


# kafka-python loads its schemas with deprecated importlib.resources calls on first import.
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize(
    ("version", "magic", "codec"), [(0, 0, 0), (1, 0, 1), (2, 1, 0), (2, 1, 2), (2, 1, 3)]
)
def test_legacy_message_sets_come_out_as_one_batch(version, magic, codec):
    """kafka-python's message sets (an independent writer) become one v2 batch with the same
    keys, values and timestamps (magic 0: none), compressed as sent; a bad CRC leaves that
    partition without records and with a CorruptRecordError, the others go on."""
    from sluice.broker.log.errors import CorruptRecordError
    from sluice.broker.log.record_batch import validate_batch
    from sluice.broker.log.records import decode_batch

    good = _legacy_set(magic, codec, 6)
    bad = bytearray(_legacy_set(magic, codec, 2))
    bad[-1] ^= 0xFF  # the last value byte: the (outer) CRC no longer matches
    kio = _kio_request(version, None, 1, 1000, [("t", [(0, good), (1, bytes(bad)), (2, None)])])
    request = decode_request(encode_request(7, "client", kio)[4:])
    assert request.api_version == version and request.body.transactional_id is None
    converted, corrupt, empty = request.body.topic_data[0].partition_data
    assert validate_batch(converted.records).compression == codec
    records = decode_batch(converted.records)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records] == [
        (i, None if i % 2 else b"k%d" % i, b"v" * i, 1_700_000_000_000 + i if magic else -1)
        for i in range(6)
    ]
    assert converted.error is None
    assert corrupt.records is None and isinstance(corrupt.error, CorruptRecordError)
    assert "CRC" in str(corrupt.error)
    assert (empty.records, empty.error) == (None, None)
