"""The records of ``__share_group_state`` byte for byte as Kafka's schemas lay them out
(ShareSnapshotKey/Value, ShareUpdateKey/Value), round trips, how a replay applies them, and
the partition a share-partition's records go to (Kafka's ``groupId:topicId:partition`` hashed
as Java's ``String.hashCode``: the expected partitions were computed with Java)."""

from __future__ import annotations

import uuid

import pytest

from sluice.broker.share.share_state_records import (
    SNAPSHOT,
    UPDATE,
    CorruptShareStateRecordError,
    ShareState,
    ShareStateKey,
    ShareUpdate,
    StateBatch,
    apply,
    decode_key,
    decode_value,
    encode_key,
    encode_snapshot,
    encode_update,
    from_batches,
    partition_for,
    to_batches,
)

TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
KEY = ShareStateKey("g", TOPIC_ID, 2)
BATCHES = (StateBatch(10, 12, 2, 1), StateBatch(13, 13, 0, 2))


def test_key_bytes() -> None:
    expected = bytes.fromhex("000000016700112233445566778899aabbccddeeff00000002")
    assert encode_key(SNAPSHOT, KEY) == expected
    assert encode_key(UPDATE, KEY) == bytes.fromhex("0001") + expected[2:]
    assert decode_key(expected) == (SNAPSHOT, KEY)
    assert decode_key(encode_key(UPDATE, KEY)) == (UPDATE, KEY)


def test_snapshot_value_bytes() -> None:
    state = ShareState(10, BATCHES, state_epoch=1, leader_epoch=3, create_timestamp=1000,
                       write_timestamp=1000)  # fmt: skip
    expected = bytes.fromhex(
        "0000"  # version 0
        "00000000"
        "00000001"
        "00000003"  # snapshot epoch, state epoch, leader epoch
        "000000000000000a"  # start offset
        "00000000000003e8"
        "00000000000003e8"  # create and write timestamps
        "03"  # two state batches (compact array: count + 1)
        "000000000000000a"
        "000000000000000c"
        "02"
        "0001"
        "00"
        "000000000000000d"
        "000000000000000d"
        "00"
        "0002"
        "00"
        "00"  # no tagged fields
    )
    assert encode_snapshot(state) == expected
    assert decode_value(SNAPSHOT, expected) == state


def test_update_value_bytes_with_a_tagged_field() -> None:
    expected = bytes.fromhex(
        "0000"
        "00000000"
        "00000003"
        "ffffffffffffffff"  # version, snapshot/leader epochs, -1
        "02"
        "000000000000000d"
        "000000000000000d"
        "00"
        "0002"
        "00"
        "01"
        "00"
        "04"
        "00000007"  # one tagged field: tag 0 (DeliveryCompleteCount), 4 bytes
    )
    assert encode_update(0, 3, -1, BATCHES[1:], delivery_complete_count=7) == expected
    assert decode_value(UPDATE, expected) == ShareUpdate(0, 3, -1, BATCHES[1:], 7)


def test_unknown_tags_are_skipped_and_bad_bytes_refused() -> None:
    plain = encode_update(0, 3, 5, ())
    with_unknown = plain[:-1] + bytes.fromhex("010502abcd")  # tag 5, 2 bytes
    assert decode_value(UPDATE, with_unknown) == decode_value(UPDATE, plain)
    with pytest.raises(CorruptShareStateRecordError, match="expected 8 more bytes"):
        decode_value(UPDATE, plain[:10])
    with pytest.raises(CorruptShareStateRecordError, match="expected version 0, found 1"):
        decode_value(UPDATE, b"\x00\x01" + plain[2:])
    with pytest.raises(CorruptShareStateRecordError, match="found"):
        decode_value(UPDATE, plain + b"\x00")
    assert decode_key(b"\x00\x07" + encode_key(SNAPSHOT, KEY)[2:]) is None  # a newer type


@pytest.mark.parametrize("group", ["g", "sg-é", ""])
def test_round_trips(group: str) -> None:
    key = ShareStateKey(group, uuid.uuid4(), 7)
    assert decode_key(encode_key(UPDATE, key)) == (UPDATE, key)
    state = ShareState(5, BATCHES, 2, 9, 1, 11, 12, 40)
    assert decode_value(SNAPSHOT, encode_snapshot(state)) == state


def test_replay_snapshot_updates_and_tombstone() -> None:
    state = apply(None, ShareState(10, BATCHES, leader_epoch=1))
    # An update moves the start past 10-12 and re-states 13; 14-15 are new.
    update = ShareUpdate(0, 2, 13, (StateBatch(13, 13, 2, 2), StateBatch(14, 15, 0, 1)))
    state = apply(state, update)
    assert state is not None
    assert (state.start_offset, state.leader_epoch, state.updates) == (13, 2, 1)
    assert from_batches(state.batches) == [(13, 2, 2), (14, 0, 1), (15, 0, 1)]
    # -1: the start stays; the batches merge.
    state = apply(state, ShareUpdate(0, 2, -1, (StateBatch(15, 15, 4, 1),)))
    assert state is not None and state.start_offset == 13
    assert state.batches == (StateBatch(13, 13, 2, 2), StateBatch(14, 14, 0, 1),
                             StateBatch(15, 15, 4, 1))  # fmt: skip
    assert apply(state, None) is None


def test_batches_are_runs_of_one_state_and_count() -> None:
    records = [(3, 0, 1), (4, 0, 1), (5, 2, 1), (7, 2, 1), (8, 2, 2)]
    assert to_batches(records) == [
        StateBatch(3, 4, 0, 1), StateBatch(5, 5, 2, 1), StateBatch(7, 7, 2, 1),
        StateBatch(8, 8, 2, 2),
    ]  # fmt: skip
    assert from_batches(to_batches(records)) == records


def test_partition_is_kafkas() -> None:
    one = uuid.UUID(int=1)  # Kafka spells it AAAAAAAAAAAAAAAAAAAAAQ
    assert ShareStateKey("g", one, 2).coordinator_key() == "g:AAAAAAAAAAAAAAAAAAAAAQ:2"
    # "g:AAAAAAAAAAAAAAAAAAAAAQ:2".hashCode() == -92966821, "sg-é:…:0" 1896822064 (Java)
    assert partition_for(ShareStateKey("g", one, 2), 50) == 21
    assert partition_for(ShareStateKey("sg-é", one, 0), 50) == 14
