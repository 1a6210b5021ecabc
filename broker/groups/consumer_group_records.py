"""A consumer group (KIP-848) as the records Kafka 4's coordinator keeps in ``__consumer_offsets``,
and back.

One group is, keyed by record type (the key's version; Kafka's ``CoordinatorRecordHelpers``)::

    3  ConsumerGroupMetadataKey(group)                     → ConsumerGroupMetadataValue
                                                               (group epoch)
    5  ConsumerGroupMemberMetadataKey(group, member)       → ConsumerGroupMemberMetadataValue
                                                               (instance, rack, client, host,
                                                                subscription, assignor, timeout)
    6  ConsumerGroupTargetAssignmentMetadataKey(group)     → …MetadataValue (assignment epoch)
    7  ConsumerGroupTargetAssignmentMemberKey(group, m.)   → …MemberValue (the member's target)
    8  ConsumerGroupCurrentMemberAssignmentKey(group, m.)  → ConsumerGroupCurrentMemberAssignment-
                                                               Value (epochs, state, assigned and
                                                               pending-revocation partitions)

Partitions travel by topic id. :func:`group_records` renders a group as its full set of
records; the coordinator writes the difference from what it wrote last (changed values, and
tombstones for the keys that went away: a member that left). :func:`load_group` rebuilds a
group from the live records a partition load found; partitions of topics that no longer
exist (an id no topic has) are dropped. Sessions restart at load: a member must heartbeat
within a session timeout of its new coordinator, as in Kafka. Pure.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from sluice.broker.groups.consumer_assignors import Assignment
from sluice.broker.groups.consumer_group import ConsumerGroup, ConsumerMember, MemberState
from sluice.broker.groups.offsets_topic_records import (
    KEY_TYPES,
    VALUE_OF_KEY,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerMemberKey,
    ConsumerTopicPartitions,
    decode_record_key,
    decode_value,
    encode_record_key,
    encode_value,
)

__all__ = ["group_records", "load_group"]

GROUP_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_MEMBER = 3, 5, 6, 7, 8
#: Kafka's ``MemberState`` bytes.
_STATE_BYTE = {
    MemberState.STABLE: 0,
    MemberState.UNREVOKED_PARTITIONS: 1,
    MemberState.UNRELEASED_PARTITIONS: 2,
}
_STATE_OF_BYTE = {b: s for s, b in _STATE_BYTE.items()}


def _record(key_type: int, key: object, value: object) -> tuple[bytes, bytes]:
    schema = VALUE_OF_KEY[KEY_TYPES[key_type]]
    return encode_record_key(key_type, key), encode_value(schema, 0, value)


def _by_id(
    assignment: Assignment, ids: Mapping[str, uuid.UUID]
) -> tuple[ConsumerTopicPartitions, ...]:
    return tuple(
        ConsumerTopicPartitions(ids[t], tuple(sorted(ps)))
        for t, ps in sorted(assignment.items())
        if t in ids
    )


def _by_name(
    parts: tuple[ConsumerTopicPartitions, ...], names: Mapping[uuid.UUID, str]
) -> Assignment:
    return {
        names[tp.topic_id]: frozenset(tp.partitions)
        for tp in parts
        if tp.topic_id in names and tp.partitions
    }


def group_records(group: ConsumerGroup, ids: Mapping[str, uuid.UUID]) -> dict[bytes, bytes]:
    """Every record of ``group``, key bytes → value bytes; ``ids``: topic name → id."""
    g = group.group_id
    epoch = ConsumerGroupMetadataValue(group.group_epoch)
    target_epoch = ConsumerGroupTargetAssignmentMetadataValue(group.target_epoch)
    out = dict(
        [
            _record(GROUP_METADATA, ConsumerGroupKey(g), epoch),
            _record(TARGET_METADATA, ConsumerGroupKey(g), target_epoch),
        ]
    )
    for m in group.members.values():
        key = ConsumerMemberKey(g, m.member_id)
        metadata = ConsumerGroupMemberMetadataValue(
            m.instance_id, m.rack_id, m.client_id, m.client_host, m.subscribed_names,
            m.subscribed_regex, m.rebalance_timeout_ms, m.server_assignor,
        )  # fmt: skip
        target = ConsumerGroupTargetAssignmentMemberValue(
            _by_id(group.target.get(m.member_id, {}), ids)
        )
        current = ConsumerGroupCurrentMemberAssignmentValue(
            m.member_epoch, m.previous_member_epoch, _STATE_BYTE[m.state],
            _by_id(m.assigned, ids), _by_id(m.pending_revocation, ids),
        )  # fmt: skip
        for key_type, value in (
            (MEMBER_METADATA, metadata),
            (TARGET_MEMBER, target),
            (CURRENT_MEMBER, current),
        ):
            k, v = _record(key_type, key, value)
            out[k] = v
    return out


def load_group(
    group_id: str,
    records: Mapping[bytes, bytes],
    names: Mapping[uuid.UUID, str],
    session_deadline: float,
) -> ConsumerGroup:
    """The group the live ``records`` describe; ``names``: topic id → name."""
    group = ConsumerGroup(group_id)
    members: dict[str, ConsumerMember] = {}
    current: dict[str, ConsumerGroupCurrentMemberAssignmentValue] = {}
    for raw_key, raw_value in records.items():
        key_type, key = decode_record_key(raw_key)
        value = decode_value(VALUE_OF_KEY[KEY_TYPES[key_type]], raw_value)
        if key_type == GROUP_METADATA:
            group.group_epoch = value.epoch
        elif key_type == TARGET_METADATA:
            group.target_epoch = value.assignment_epoch
        elif key_type == TARGET_MEMBER:
            group.target[key.member_id] = _by_name(value.topic_partitions, names)
        elif key_type == CURRENT_MEMBER:
            current[key.member_id] = value
        elif key_type == MEMBER_METADATA:
            members[key.member_id] = ConsumerMember(
                key.member_id, instance_id=value.instance_id, rack_id=value.rack_id,
                client_id=value.client_id, client_host=value.client_host,
                subscribed_names=tuple(value.subscribed_topic_names),
                subscribed_regex=value.subscribed_topic_regex,
                server_assignor=value.server_assignor,
                rebalance_timeout_ms=value.rebalance_timeout_ms,
                session_deadline=session_deadline,
            )  # fmt: skip
    for member_id, member in sorted(members.items()):
        state = current.get(member_id)
        if state is not None:
            member.member_epoch, member.previous_member_epoch = (
                state.member_epoch,
                state.previous_member_epoch,
            )
            member.state = _STATE_OF_BYTE.get(state.state, MemberState.STABLE)
            member.assigned = _by_name(state.assigned_partitions, names)
            member.pending_revocation = _by_name(state.partitions_pending_revocation, names)
        group.update_member(member)
    # A target for a member without metadata (a partial write) means nothing.
    group.target = {m: a for m, a in group.target.items() if m in group.members}
    return group
