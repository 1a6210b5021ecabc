"""``__consumer_offsets`` records in Kafka's binary schemas: bytes built by hand from Kafka's
JSON schemas (OffsetCommitKey/Value, GroupMetadataKey/Value) decode, and what is written is
what Kafka 3.x writes."""

import dataclasses
import struct
import uuid

import pytest

from sluice.broker.groups.offsets_topic_records import (
    KEY_TYPES,
    SCHEMAS,
    VALUE_OF_KEY,
    CorruptOffsetsRecordError,
    Field,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Schema,
    UnsupportedOffsetsRecordVersionError,
    decode_group_metadata_value,
    decode_key,
    decode_legacy_key,
    decode_legacy_value,
    decode_offset_commit_value,
    decode_record_key,
    decode_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
    encode_record_key,
    encode_value,
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
    assert decode_key(struct.pack(">h", 99) + b"whatever") is None
    # Kafka 4.0's partition metadata (type 4) is not read either.
    assert decode_key(struct.pack(">h", 4) + s("g")) is None


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


def test_unknown_versions_and_bad_bytes_are_refused():
    with pytest.raises(UnsupportedOffsetsRecordVersionError, match="found 5"):
        decode_offset_commit_value(struct.pack(">h", 5) + b"\x00" * 30)
    with pytest.raises(UnsupportedOffsetsRecordVersionError, match="found 5"):
        decode_group_metadata_value(struct.pack(">h", 5) + b"\x00" * 30)
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


def test_group_metadata_value_v1_decodes_burrows_test_bytes():
    # linkedin/Burrow core/internal/consumer/kafka_client_test.go: the value header of
    # TestKafkaClient_decodeMetadataValueHeader and the member of
    # TestKafkaClient_decodeMetadataMember (a v1 member: rebalance timeout 4, session 8, a
    # 22-byte ConsumerProtocol assignment of topic1-0), framed as Kafka frames them. Burrow's
    # member bytes run 4 bytes past the assignment its length announces (its reader stops at
    # the length); those 4 are cut here.
    header = b"\x00\x08testtype\x00\x00\x00\x01\x00\x0ctestprotocol\x00\x0atestleader"
    member = (
        b"\x00\x0ctestmemberid\x00\x0ctestclientid\x00\x0etestclienthost\x00\x00\x00\x04"
        b"\x00\x00\x00\x08\x00\x00\x00\x00\x00\x00\x00\x16\x00\x00\x00\x00\x00\x01\x00\x06"
        b"topic1\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00"
    )[:-4]
    value = decode_group_metadata_value(b"\x00\x01" + header + b"\x00\x00\x00\x01" + member)
    assert (value.protocol_type, value.generation, value.protocol, value.leader) == (
        "testtype", 1, "testprotocol", "testleader",
    )  # fmt: skip
    (m,) = value.members
    assert (m.member_id, m.client_id, m.client_host) == (
        "testmemberid", "testclientid", "testclienthost",
    )  # fmt: skip
    assert (m.rebalance_timeout, m.session_timeout, m.subscription) == (4, 8, b"")
    assert m.assignment == member[-22:] and m.group_instance_id is None
    assert value.current_state_timestamp == -1


def uvarint(n):
    out = b""
    while n > 0x7F:
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7
    return out + bytes([n])


def cs(text):  # a compact string (flexible versions)
    return b"\x00" if text is None else uvarint(len(text.encode()) + 1) + text.encode()


def cb(data):  # compact bytes
    return uvarint(len(data) + 1) + data


def test_kafka_4_flexible_v4_values_decode_and_unknown_tags_are_skipped():
    # GroupMetadataValue.json / OffsetCommitValue.json: "flexibleVersions": "4+".
    member = (
        cs("m-1") + cs("inst") + cs("client") + cs("/10.0.0.1") + struct.pack(">ii", 300, 100)
        + cb(b"sub") + cb(b"asg") + b"\x00"
    )  # fmt: skip
    unknown_tag = b"\x01" + uvarint(7) + uvarint(3) + b"xyz"  # one tagged field, tag 7
    raw = (
        struct.pack(">h", 4) + cs("consumer") + struct.pack(">i", 9) + cs("range") + cs(None)
        + struct.pack(">q", 55) + uvarint(2) + member + unknown_tag
    )  # fmt: skip
    value = decode_group_metadata_value(raw)
    assert value == GroupMetadataValue(
        "consumer", 9, "range", None, 55,
        (MemberMetadata("m-1", "inst", "client", "/10.0.0.1", 300, 100, b"sub", b"asg"),),
    )  # fmt: skip
    assert encode_group_metadata_value(value, 4) == raw[: -len(unknown_tag)] + b"\x00"
    offset = struct.pack(">hqi", 4, 42, 5) + cs("meta") + struct.pack(">q", 7) + b"\x00"
    assert decode_offset_commit_value(offset) == OffsetCommitValue(42, 5, "meta", 7)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_every_group_metadata_version_round_trips_what_it_holds(version):
    member = MemberMetadata("m", "i" if version >= 3 else None, "c", "h", 30 if version else 10,
                            10, b"s", b"a")  # fmt: skip
    value = GroupMetadataValue("consumer", 3, None, "m", 12 if version >= 2 else -1, (member,))
    assert decode_group_metadata_value(encode_group_metadata_value(value, version)) == value


def test_record_types_are_data():
    assert KEY_TYPES[2] == "GroupMetadataKey" and VALUE_OF_KEY["GroupMetadataKey"] == (
        "GroupMetadataValue"
    )
    key = encode_record_key(0, OffsetCommitKey("g", "t", 1))
    assert decode_record_key(key) == (0, OffsetCommitKey("g", "t", 1))
    assert decode_record_key(struct.pack(">h", 4) + s("g")) == (4, None)
    with pytest.raises(ValueError, match="expected version"):
        encode_value("GroupMetadataValue", 5, None)


def test_tagged_fields_of_a_flexible_schema_are_written_only_when_set(monkeypatch):
    # A schema of the kind Kafka 4's coordinator records use (flexible from version 0, a
    # tagged field, arrays of int32, a uuid), declared as data.
    @dataclasses.dataclass(frozen=True)
    class Record:
        name: str
        partitions: tuple[int, ...]
        topic_id: uuid.UUID
        note: str | None = None

    schema = Schema(
        "TestRecord",
        (Field("name", "string"), Field("partitions", "[int32]"), Field("topic_id", "uuid"),
         Field("note", "string?", tag=0)),
        Record, flexible_from=0, versions=(0, 0),
    )  # fmt: skip
    monkeypatch.setitem(SCHEMAS, "TestRecord", schema)
    topic_id = uuid.UUID(int=7)
    plain = Record("n", (1, 2), topic_id)
    raw = encode_value("TestRecord", 0, plain)
    body = cs("n") + uvarint(3) + struct.pack(">ii", 1, 2) + topic_id.bytes
    assert raw == struct.pack(">h", 0) + body + b"\x00"
    assert decode_value("TestRecord", raw) == plain
    noted = Record("n", (1, 2), topic_id, "hi")
    raw = encode_value("TestRecord", 0, noted)
    assert raw == struct.pack(">h", 0) + body + b"\x01\x00" + uvarint(3) + cs("hi")
    assert decode_value("TestRecord", raw) == noted
