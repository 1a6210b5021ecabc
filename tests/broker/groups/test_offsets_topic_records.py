"""``__consumer_offsets`` records in Kafka's binary schemas: bytes built by hand from Kafka's
JSON schemas (OffsetCommitKey/Value, GroupMetadataKey/Value) decode, and what is written is
what Kafka 3.x writes."""

import struct

import pytest

from sluice.broker.groups.offsets_topic_records import (
    CorruptOffsetsRecordError,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    UnsupportedOffsetsRecordVersionError,
    decode_group_metadata_value,
    decode_key,
    decode_legacy_key,
    decode_legacy_value,
    decode_offset_commit_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
    is_legacy_json,
)


def s(text):
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def b(data):
    return struct.pack(">i", len(data)) + data


def test_offset_commit_key_is_version_1_group_topic_partition():
    raw = encode_key(OffsetCommitKey("g", "topic", 7))
    assert raw == struct.pack(">h", 1) + s("g") + s("topic") + struct.pack(">i", 7)
    assert decode_key(raw) == OffsetCommitKey("g", "topic", 7)
    # Version 0 has the same layout (older Kafkas wrote it).
    assert decode_key(struct.pack(">h", 0) + raw[2:]) == OffsetCommitKey("g", "topic", 7)


def test_group_metadata_key_is_version_2_group():
    raw = encode_key(GroupMetadataKey("g"))
    assert raw == struct.pack(">h", 2) + s("g")
    assert decode_key(raw) == GroupMetadataKey("g")


def test_unknown_key_versions_are_skipped():
    assert decode_key(struct.pack(">h", 3) + b"whatever") is None


def test_offset_commit_value_v3_as_kafka_3_writes_it():
    value = OffsetCommitValue(42, 5, "meta", 1_700_000_000_000)
    raw = encode_offset_commit_value(value)
    assert raw == struct.pack(">hqi", 3, 42, 5) + s("meta") + struct.pack(">q", 1_700_000_000_000)
    assert decode_offset_commit_value(raw) == value


@pytest.mark.parametrize(
    ("version", "body", "expected"),
    [
        (0, struct.pack(">q", 9) + s("m") + struct.pack(">q", 11),
         OffsetCommitValue(9, -1, "m", 11)),
        (1, struct.pack(">q", 9) + s("m") + struct.pack(">qq", 11, 99),
         OffsetCommitValue(9, -1, "m", 11, 99)),
        (2, struct.pack(">q", 9) + s("") + struct.pack(">q", 11), OffsetCommitValue(9, -1, "", 11)),
    ],
)  # fmt: skip
def test_older_offset_commit_values_decode(version, body, expected):
    assert decode_offset_commit_value(struct.pack(">h", version) + body) == expected


def test_an_expire_timestamp_is_written_as_v1():
    raw = encode_offset_commit_value(OffsetCommitValue(1, 3, "", 2, expire_timestamp=5))
    assert raw[:2] == struct.pack(">h", 1)
    assert decode_offset_commit_value(raw) == OffsetCommitValue(1, -1, "", 2, 5)


def test_group_metadata_value_v3_round_trips_and_matches_the_schema():
    member = MemberMetadata("m-1", "inst", "client", "/10.0.0.1", 30_000, 10_000, b"sub", b"asg")
    value = GroupMetadataValue("consumer", 4, "range", "m-1", 1234, (member,))
    raw = encode_group_metadata_value(value)
    expected = (
        struct.pack(">h", 3) + s("consumer") + struct.pack(">i", 4) + s("range") + s("m-1")
        + struct.pack(">q", 1234) + struct.pack(">i", 1)
        + s("m-1") + s("inst") + s("client") + s("/10.0.0.1") + struct.pack(">ii", 30_000, 10_000)
        + b(b"sub") + b(b"asg")
    )  # fmt: skip
    assert raw == expected
    assert decode_group_metadata_value(raw) == value


def test_group_metadata_value_v0_reads_kafka_defaults():
    body = (
        s("consumer") + struct.pack(">i", 1) + struct.pack(">h", -1) + struct.pack(">h", -1)
        + struct.pack(">i", 1) + s("m") + s("c") + s("h") + struct.pack(">i", 6000)
        + b(b"") + b(b"")
    )  # fmt: skip
    value = decode_group_metadata_value(struct.pack(">h", 0) + body)
    assert value == GroupMetadataValue(
        "consumer", 1, None, None, -1, (MemberMetadata("m", None, "c", "h", 6000, 6000, b"", b""),)
    )


def test_flexible_versions_and_bad_bytes_are_refused():
    with pytest.raises(UnsupportedOffsetsRecordVersionError, match="found 4"):
        decode_offset_commit_value(struct.pack(">h", 4) + b"\x00" * 30)
    raw = encode_offset_commit_value(OffsetCommitValue(1, 1, "m", 1))
    with pytest.raises(CorruptOffsetsRecordError, match="more bytes"):
        decode_offset_commit_value(raw[:-1])
    with pytest.raises(CorruptOffsetsRecordError, match="expected"):
        decode_offset_commit_value(raw + b"x")


def test_legacy_json_records_are_recognised_and_read():
    key = b'{"version": 1, "group": "g", "topic": "t", "partition": 2}'
    assert is_legacy_json(key) and not is_legacy_json(encode_key(GroupMetadataKey("g")))
    assert decode_legacy_key(key) == OffsetCommitKey("g", "t", 2)
    value = (
        b'{"version": 1, "offset": 5, "leader_epoch": 1, "metadata": null, "commit_timestamp": 9}'
    )
    assert decode_legacy_value(value) == OffsetCommitValue(5, 1, "", 9)
    with pytest.raises(CorruptOffsetsRecordError):
        decode_legacy_key(b"{}")
