"""Message sets of magic 0/1 and their conversion to and from magic-2 batches, against a pure
model (a list of messages) and against kafka-python's own legacy-record code, an independent
writer and reader."""

from __future__ import annotations

import struct
import warnings
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.broker.log.errors import CorruptRecordError, InvalidRecordError
from sluice.broker.log.legacy_records import (
    codecs,
    read_message_set,
    to_message_set,
    to_record_batch,
    write_message_set,
)
from sluice.broker.log.records import GZIP, LZ4, NONE, SNAPPY, ZSTD, decode_batch, encode_batch

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

blobs = st.one_of(st.none(), st.binary(max_size=64))
timestamps = st.integers(0, 2**45)
messages = st.lists(st.tuples(blobs, blobs, timestamps), min_size=1, max_size=20)
magic_codec = st.sampled_from(
    [(0, NONE), (0, GZIP), (0, SNAPPY), (1, NONE), (1, GZIP), (1, SNAPPY), (1, LZ4)]
)


def _model(
    msgs: list[tuple[bytes | None, bytes | None, int]], magic: int, first: int = 0
) -> list[tuple[int, bytes | None, bytes | None, int]]:
    return [(first + i, k, v, ts if magic else -1) for i, (k, v, ts) in enumerate(msgs)]


@settings(max_examples=60, deadline=None)
@given(msgs=messages, mc=magic_codec, first=st.integers(0, 2**40))
def test_write_read_round_trip(msgs: Any, mc: tuple[int, int], first: int) -> None:
    magic, codec = mc
    data = write_message_set(
        [(first + i, ts, k, v) for i, (k, v, ts) in enumerate(msgs)], magic=magic, codec=codec
    )
    got = [(m.offset, m.key, m.value, m.timestamp) for m in read_message_set(data)]
    assert got == _model(msgs, magic, first)


@settings(max_examples=60, deadline=None)
@given(msgs=messages, mc=magic_codec)
def test_up_conversion_keeps_every_message(msgs: Any, mc: tuple[int, int]) -> None:
    magic, codec = mc
    data = write_message_set(
        [(i, ts, k, v) for i, (k, v, ts) in enumerate(msgs)], magic=magic, codec=codec
    )
    batch = to_record_batch(data)
    assert codecs(batch) == {codec}
    got = [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in decode_batch(batch)]
    assert got == [(o, k, v, ts, ()) for o, k, v, ts in _model(msgs, magic)]


@settings(max_examples=60, deadline=None)
@given(
    batches=st.lists(
        st.tuples(messages, st.sampled_from([NONE, GZIP, SNAPPY, LZ4]), st.booleans()),
        min_size=1,
        max_size=4,
    ),
    magic=st.sampled_from([0, 1]),
    base=st.integers(0, 2**40),
)
def test_down_conversion_keeps_offsets_and_drops_headers(
    batches: Any, magic: int, base: int
) -> None:
    """Batches (some with headers, some control) down to a message set: the model is every
    non-control record, at its offset, with its timestamp at magic 1."""
    data = b""
    expected = []
    offset = base
    for msgs, codec, control in batches:
        records = [(k, v, [("h", b"x")]) for k, v, _ in msgs]
        stamps = [ts for _, _, ts in msgs]
        data += encode_batch(
            records, base_offset=offset, timestamps=stamps, codec=codec, control=control
        )
        if not control:
            expected += _model(msgs, magic, offset)
        offset += len(msgs)
    got = [(m.offset, m.key, m.value, m.timestamp) for m in read_message_set(
        to_message_set(data, magic))]  # fmt: skip
    assert got == expected


@pytest.mark.parametrize(
    ("magic", "codec"), [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3)]
)
def test_kafka_python_reads_what_we_write_and_we_read_what_it_writes(
    magic: int, codec: int
) -> None:
    msgs = [
        (b"k%d" % i if i % 2 else None, b"value %d" % i, 1_700_000_000_000 + i) for i in range(9)
    ]
    # Ours → kafka-python.
    ours = to_message_set(
        encode_batch(
            [(k, v) for k, v, _ in msgs],
            base_offset=500,
            timestamps=[ts for *_, ts in msgs],
            codec=codec,
        ),  # fmt: skip
        magic,
    )
    reader = MemoryRecords(ours)
    got = []
    while reader.has_next():
        batch = reader.next_batch()
        assert batch is not None
        got += [(r.offset, r.key, r.value, r.timestamp) for r in batch]
    assert got == [(500 + i, k, v, ts if magic else None) for i, (k, v, ts) in enumerate(msgs)]
    # kafka-python → ours.
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, (k, v, ts) in enumerate(msgs):
        builder.append(i, timestamp=ts if magic else None, key=k, value=v)
    batch_bytes = to_record_batch(bytes(builder.build()))
    assert [(r.key, r.value, r.timestamp) for r in decode_batch(batch_bytes)] == [
        (k, v, ts if magic else -1) for k, v, ts in msgs
    ]


def _raw(magic: int, attributes: int, key: bytes | None, value: bytes | None,
         offset: int = 0, crc_flip: int = 0) -> bytes:  # fmt: skip
    body = bytes([magic, attributes]) + (struct.pack(">q", 5) if magic else b"")
    for blob in (key, value):
        body += struct.pack(">i", -1) if blob is None else struct.pack(">i", len(blob)) + blob
    message = struct.pack(">I", zlib.crc32(body) ^ crc_flip) + body
    return struct.pack(">qi", offset, len(message)) + message


def test_bad_crc_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="CRC"):
        to_record_batch(_raw(1, 0, b"k", b"v", crc_flip=1))


@pytest.mark.parametrize("cut", [1, 11, 12, 20, 25])
def test_truncation_is_corrupt(cut: int) -> None:
    data = _raw(0, 0, b"key", b"value")
    with pytest.raises(CorruptRecordError):
        to_record_batch(data[:-cut])


def test_malformed_wrappers_are_invalid() -> None:
    inner = _raw(1, 0, b"k", b"v")
    with pytest.raises(InvalidRecordError, match="expected no key"):
        to_record_batch(_raw(1, GZIP, b"key", bytes(__import__("cramjam").gzip.compress(inner))))
    magic0_inner = _raw(0, 0, b"k", b"v")
    with pytest.raises(InvalidRecordError, match="magic 0, expected the wrapper's 1"):
        to_record_batch(
            _raw(1, GZIP, None, bytes(__import__("cramjam").gzip.compress(magic0_inner)))
        )
    with pytest.raises(InvalidRecordError, match="codec 4"):
        to_record_batch(_raw(1, ZSTD, None, b"x"))


def test_zstd_batches_are_reported_not_converted() -> None:
    batch = encode_batch([(b"k", b"v")], codec=ZSTD)
    assert codecs(batch) == {ZSTD}
    with pytest.raises(ValueError, match="zstd"):
        to_message_set(batch, 1)


def test_empty_sets() -> None:
    assert to_record_batch(b"") == b""
    assert to_message_set(b"", 0) == b""
