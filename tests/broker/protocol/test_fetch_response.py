"""The zero-copy Fetch response encoder, byte-for-byte against kio for v4–v12."""

from __future__ import annotations

import importlib
import struct
import warnings
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from sluice.broker.protocol.codec import decode_response, encode_response
from sluice.broker.protocol.errors import LocalProtocolError
from sluice.broker.protocol.fetch_response import (
    EncodedFetchResponse,
    FetchPartition,
    FetchTopic,
    encode_fetch_response,
)
from sluice.broker.protocol.headers import RequestHeader


@dataclass
class FakeSlice:
    """Stands for the storage layer's FileSlice: only ``size`` is read by the encoder."""

    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)


def join(encoded: EncodedFetchResponse) -> bytes:
    out = b"".join(c.data if isinstance(c, FakeSlice) else bytes(c) for c in encoded.chunks)
    assert len(out) == encoded.size
    return out


def kio_equivalent(version: int, topics: list[FetchTopic], **top: Any) -> Any:
    module = importlib.import_module(f"kio.schema.fetch.v{version}.response")

    def records(value: Any) -> bytes | None:
        if value is None:
            return None
        return value.data if isinstance(value, FakeSlice) else bytes(value)

    def partition(p: FetchPartition) -> Any:
        fields: dict[str, Any] = {
            "partition_index": p.partition_index,
            "error_code": ErrorCode(p.error_code),
            "high_watermark": p.high_watermark,
            "last_stable_offset": p.last_stable_offset,
            "aborted_transactions": None
            if p.aborted_transactions is None
            else tuple(
                module.AbortedTransaction(producer_id=a, first_offset=b)
                for a, b in p.aborted_transactions
            ),
            "records": records(p.records),
        }
        if version >= 5:
            fields["log_start_offset"] = p.log_start_offset
        if version >= 11:
            fields["preferred_read_replica"] = p.preferred_read_replica
        if version >= 12 and p.diverging_epoch is not None:
            epoch, end_offset = p.diverging_epoch
            fields["diverging_epoch"] = module.EpochEndOffset(epoch=epoch, end_offset=end_offset)
        return module.PartitionData(**fields)

    body: dict[str, Any] = {
        "throttle_time": timedelta(milliseconds=top.get("throttle_time_ms", 0)),
        "responses": tuple(
            module.FetchableTopicResponse(
                topic=t.topic, partitions=tuple(partition(p) for p in t.partitions)
            )
            for t in topics
        ),
    }
    if version >= 7:
        body["error_code"] = ErrorCode(top.get("error_code", 0))
        body["session_id"] = top.get("session_id", 0)
    return module.FetchResponse(**body)


i64 = st.integers(-(2**63), 2**63 - 1)
records_values = st.one_of(
    st.none(),
    st.binary(max_size=40),
    st.binary(min_size=1, max_size=40).map(FakeSlice),
    st.binary(max_size=40).map(memoryview),
)
partitions = st.builds(
    FetchPartition,
    partition_index=st.integers(0, 2**31 - 1),
    error_code=st.sampled_from([0, 1, 3, 6, 74]),
    high_watermark=i64,
    last_stable_offset=i64,
    log_start_offset=i64,
    aborted_transactions=st.none() | st.lists(st.tuples(i64, i64), max_size=3),
    preferred_read_replica=st.integers(-1, 5),
    records=records_values,
    diverging_epoch=st.none() | st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1)),
)
topics_strategy = st.lists(
    st.builds(FetchTopic, topic=st.text(max_size=12), partitions=st.lists(partitions, max_size=4)),
    max_size=3,
)


@pytest.mark.parametrize("version", range(4, 13))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    topics=topics_strategy,
    corr=st.integers(-(2**31), 2**31 - 1),
    throttle=st.integers(0, 2**31 - 1),
    session_id=st.integers(0, 2**31 - 1),
    error_code=st.sampled_from([0, 70, 71]),
)
def test_identical_to_kio(
    version: int,
    topics: list[FetchTopic],
    corr: int,
    throttle: int,
    session_id: int,
    error_code: int,
) -> None:
    header = RequestHeader(1, version, corr, "c", 1)
    top = {"throttle_time_ms": throttle, "session_id": session_id, "error_code": error_code}
    if version < 7:
        top.pop("session_id")
        top.pop("error_code")
    if version < 12:  # a diverging epoch is a v12 field
        for t in topics:
            for p in t.partitions:
                p.diverging_epoch = None
    encoded = encode_fetch_response(header, topics, **top)
    expected = encode_response(header, kio_equivalent(version, topics, **top))
    assert join(encoded) == expected
    # And kio's decoder reads it back.
    corr_back, body = decode_response(join(encoded)[4:], 1, version)
    assert corr_back == corr
    assert len(body.responses) == len(topics)


def test_records_are_never_copied() -> None:
    big = bytes(1 << 20)
    file_slice = FakeSlice(b"s" * 5000)
    topics = [
        FetchTopic(
            "t",
            [
                FetchPartition(0, high_watermark=10, last_stable_offset=10, records=big),
                FetchPartition(1, records=b""),  # empty: no chunk
                FetchPartition(2, records=None),
                FetchPartition(3, records=file_slice),
            ],
        )
    ]
    encoded = encode_fetch_response(RequestHeader(1, 11, 9, None, 1), topics)
    kinds = [type(c).__name__ for c in encoded.chunks]
    assert kinds == ["bytes", "bytes", "bytes", "FakeSlice"]
    assert encoded.chunks[1] is big  # the very object, not a copy
    assert encoded.chunks[3] is file_slice
    # The first chunk carries the size prefix and response header v0.
    first = encoded.chunks[0]
    assert isinstance(first, bytes)
    assert struct.unpack(">ii", first[:8]) == (encoded.size - 4, 9)
    assert encoded.size == len(join(encoded))


def test_the_response_ends_with_a_slice_when_the_last_partition_has_records() -> None:
    file_slice = FakeSlice(b"x" * 10)
    encoded = encode_fetch_response(
        RequestHeader(1, 4, 1, None, 1), [FetchTopic("t", [FetchPartition(0, records=file_slice)])]
    )
    assert encoded.chunks[-1] is file_slice
    assert len(encoded.chunks) == 2


def test_kafka_python_reads_it() -> None:
    with warnings.catch_warnings():
        # kafka-python loads its JSON schemas with a deprecated importlib.resources call.
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.protocol.consumer import FetchResponse

    batch = bytes(range(61))
    encoded = encode_fetch_response(
        RequestHeader(1, 11, 77, None, 1),
        [FetchTopic("events", [FetchPartition(0, 0, 5, 5, 0, None, -1, FakeSlice(batch))])],
    )
    parsed = FetchResponse[11].decode(join(encoded)[4:], header=True)
    assert parsed.header.correlation_id == 77
    partition = parsed.responses[0].partitions[0]
    assert partition.high_watermark == 5
    assert bytes(partition.records) == batch


def test_kafka_python_reads_v12_with_a_diverging_epoch() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.protocol.consumer import FetchResponse

    batch = bytes(range(61))
    encoded = encode_fetch_response(
        RequestHeader(1, 12, 78, None, 1),
        [FetchTopic("events", [
            FetchPartition(0, 0, 5, 5, 0, None, -1, FakeSlice(batch)),
            FetchPartition(1, 0, 9, 9, 0, None, -1, b"", diverging_epoch=(3, 7)),
        ])],
        session_id=12,
    )  # fmt: skip
    parsed = FetchResponse[12].decode(join(encoded)[4:], header=True)
    assert parsed.header.correlation_id == 78
    assert parsed.session_id == 12
    first, second = parsed.responses[0].partitions
    assert bytes(first.records) == batch
    assert (second.diverging_epoch.epoch, second.diverging_epoch.end_offset) == (3, 7)


@pytest.mark.parametrize(("key", "version"), [(1, -1), (1, 13), (0, 8)])
def test_wrong_api_or_version_is_local_error(key: int, version: int) -> None:
    with pytest.raises(LocalProtocolError):
        encode_fetch_response(RequestHeader(key, version, 1, None, 1), [])


def test_out_of_range_values_are_local_errors() -> None:
    with pytest.raises(LocalProtocolError):
        encode_fetch_response(
            RequestHeader(1, 11, 1, None, 1), [FetchTopic("t", [FetchPartition(2**31)])]
        )

    class BadSlice:
        size = -3

    with pytest.raises(LocalProtocolError, match="invalid size"):
        encode_fetch_response(
            RequestHeader(1, 11, 1, None, 1),
            [FetchTopic("t", [FetchPartition(0, records=BadSlice())])],
        )


# -- Fetch v0-v3: message sets down-converted from the batches ------------------------------


@dataclass
class ReadableSlice:
    """Stands for FileSlice where the records must be read (Fetch v0-v3): ``size`` and
    ``read()``."""

    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)

    def read(self) -> bytes:
        return self.data


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_legacy_versions_carry_message_sets(version: int) -> None:
    from sluice.broker.log.legacy_records import read_message_set
    from sluice.broker.log.records import GZIP, ZSTD, encode_batch

    batches = encode_batch([(b"k1", b"v1"), (None, b"v2")], base_offset=10,
                           timestamps=[1000, 2000], codec=GZIP)  # fmt: skip
    batches += encode_batch([(b"c", b"")], base_offset=12, control=True)
    batches += encode_batch([(b"k3", None, [("h", b"x")])], base_offset=13, timestamps=[3000])
    topics = [
        FetchTopic("t", [
            FetchPartition(0, high_watermark=14, records=ReadableSlice(batches)),
            FetchPartition(1, error_code=6, high_watermark=-1, records=None),
            FetchPartition(2, high_watermark=1, records=encode_batch([(b"z", b"z")], codec=ZSTD)),
            FetchPartition(3, high_watermark=0, records=b""),
        ])
    ]  # fmt: skip
    # The handler saw the request as v4; the client sent ``version``.
    header = RequestHeader(1, 4, 77, None, 1, wire_version=version)
    encoded = encode_fetch_response(header, topics, throttle_time_ms=5)
    assert len(encoded.chunks) == 1  # in memory: no zero copy below v4
    corr, body = decode_response(join(encoded)[4:], 1, version)
    assert corr == 77
    assert getattr(body, "throttle_time", timedelta(milliseconds=5)) == timedelta(milliseconds=5)
    data, error, zstd, empty = body.responses[0].partitions
    magic = 0 if version < 2 else 1
    got = [(m.offset, m.magic, m.key, m.value, m.timestamp)
           for m in read_message_set(data.records)]  # fmt: skip
    assert got == [
        (10, magic, b"k1", b"v1", 1000 if magic else -1),
        (11, magic, None, b"v2", 2000 if magic else -1),
        (13, magic, b"k3", None, 3000 if magic else -1),  # control batch 12 skipped
    ]
    assert (data.error_code, data.high_watermark) == (ErrorCode.none, 14)
    assert (error.error_code, error.records) == (ErrorCode.not_leader_or_follower, None)
    assert (zstd.error_code, zstd.records) == (ErrorCode.unsupported_compression_type, b"")
    assert (empty.error_code, empty.records) == (ErrorCode.none, b"")


def test_legacy_versions_need_readable_slices() -> None:
    header = RequestHeader(1, 4, 1, None, 1, wire_version=2)
    with pytest.raises(LocalProtocolError, match="read"):
        encode_fetch_response(
            header, [FetchTopic("t", [FetchPartition(0, records=FakeSlice(b"x"))])]
        )
