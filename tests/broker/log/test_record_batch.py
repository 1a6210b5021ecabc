import struct

import pytest

from sluice.broker.log.errors import CorruptRecordError
from sluice.broker.log.record_batch import (
    HEADER_SIZE,
    assign_offsets,
    compute_crc,
    iter_batches,
    parse_header,
    peek_size,
    valid_prefix,
    validate_batch,
)
from sluice.broker.log.records import GZIP, encode_batch

from .helpers import batch


def test_header_fields_round_trip():
    raw = encode_batch(
        [(b"a", b"1"), (b"b", b"2"), (None, b"3")],
        timestamps=[100, 300, 200],
        producer_id=7,
        producer_epoch=2,
        base_sequence=10,
        codec=GZIP,
    )
    h = validate_batch(raw)
    assert (h.base_offset, h.magic, h.record_count, h.last_offset_delta) == (0, 2, 3, 2)
    assert (h.first_timestamp, h.max_timestamp) == (100, 300)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (7, 2, 10, 12)
    assert h.compression == GZIP and not h.is_control and not h.is_transactional
    assert h.size == len(raw) == peek_size(raw)
    assert h.crc == compute_crc(raw)


def test_assign_offsets_rewrites_only_the_uncovered_fields():
    raw = bytearray(batch(5))
    before = bytes(raw[12 + 4 :])
    assign_offsets(raw, 0, 1_000_000, 42)
    h = validate_batch(raw)  # CRC still valid: BaseOffset and epoch are not covered
    assert (h.base_offset, h.partition_leader_epoch, h.last_offset) == (1_000_000, 42, 1_000_004)
    assert bytes(raw[16:]) == before


@pytest.mark.parametrize(
    ("offset", "fmt", "value", "message"),
    [
        (16, ">b", 1, "expected magic 2, found 1"),
        (8, ">i", 10, "expected Length >= 49, found 10"),
        (8, ">i", 10_000, "only"),
        (23, ">i", -1, "non-negative LastOffsetDelta"),
        (61, ">b", 0x55, "CRC-32C mismatch"),
    ],
)
def test_validation_names_what_was_expected_and_found(offset, fmt, value, message):
    raw = bytearray(batch(2))
    struct.pack_into(fmt, raw, offset, value)
    with pytest.raises(CorruptRecordError, match=message):
        validate_batch(raw)


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
@pytest.mark.parametrize("value_size", [20, 4000])  # under and over the small-batch copy
def test_crc_is_checked_for_every_buffer_type_and_size(wrap, value_size):
    raw = bytearray(batch(3, value_size=value_size))
    assert validate_batch(wrap(bytes(raw))).record_count == 3
    raw[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC-32C mismatch"):
        validate_batch(wrap(bytes(raw)))


def test_validation_of_a_batch_inside_a_larger_buffer():
    a, b = batch(2), batch(3, value_size=2000)
    both = memoryview(b"xx" + a + b)
    h = validate_batch(both, 2 + len(a), file_position=7)
    assert (h.position, h.record_count, h.size) == (7, 3, len(b))
    assert validate_batch(bytearray(both), 2) == validate_batch(a)._replace(position=2)


def test_short_header():
    with pytest.raises(CorruptRecordError, match=f"expected a {HEADER_SIZE}-byte batch header"):
        parse_header(b"\x00" * 20)


def test_iter_batches_and_valid_prefix():
    a, b = batch(2), batch(3)
    both = a + b
    assert [h.position for h in iter_batches(both)] == [0, len(a)]
    assert valid_prefix(both) == (len(both), None)
    torn = both[:-5]
    size, why = valid_prefix(torn)
    assert size == len(a) and "remain" in why
    with pytest.raises(CorruptRecordError):
        list(iter_batches(torn))
