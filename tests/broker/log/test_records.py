import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice.broker.log.errors import CorruptRecordError
from sluice.broker.log.records import (
    CODEC_NAMES,
    SNAPPY,
    Record,
    decode_batch,
    decompress,
    encode_batch,
    read_varint,
    write_varint,
)


@given(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1))
def test_varint_round_trip(value):
    out = bytearray()
    write_varint(out, value)
    assert read_varint(bytes(out), 0) == (value, len(out))


blobs = st.one_of(st.none(), st.binary(max_size=50))
records = st.lists(
    st.tuples(blobs, blobs, st.lists(st.tuples(st.text(max_size=5), blobs), max_size=2)),
    min_size=1,
    max_size=8,
)


@given(records, st.sampled_from(sorted(CODEC_NAMES)), st.integers(0, 2**40))
def test_encode_decode_round_trip(items, codec, base_ts):
    timestamps = [base_ts + 3 * i for i in range(len(items))]
    raw = encode_batch(items, timestamps=timestamps, codec=codec)
    decoded = decode_batch(raw)
    assert decoded == [
        Record(i, timestamps[i], k, v, tuple((hk, hv) for hk, hv in h))
        for i, (k, v, h) in enumerate(items)
    ]


def test_xerial_snappy_framing_is_understood():
    import struct

    import cramjam

    payload = b"hello snappy " * 50
    block = bytes(cramjam.snappy.compress_raw(payload))
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block
    assert decompress(SNAPPY, framed) == payload


def test_garbage_compressed_block_is_a_corrupt_record():
    with pytest.raises(CorruptRecordError, match="zstd block does not decompress"):
        decompress(4, b"not zstd at all")
