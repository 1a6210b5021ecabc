"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848) against a standalone broker, on
the wire: assignments by topic id, a partition handed over only after its owner revoked it,
fencing, describe, and a classic group's id refused."""

from __future__ import annotations

import subprocess
import sys
import uuid
from typing import Any

import pytest

from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.clients import consumer, unique
from tests.broker.server.wire import WireClient, request

pytestmark = [pytest.mark.broker]


def _beat(client: WireClient, group: str, member: str, epoch: int, **kw: Any) -> Any:
    values = {"group_id": group, "member_id": member, "member_epoch": epoch,
              "topic_partitions": None, **kw}  # fmt: skip
    return client.call(request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, values))


def _join(client: WireClient, group: str, member: str, topic: str) -> Any:
    return _beat(client, group, member, 0, rebalance_timeout=30_000,
                 subscribed_topic_names=[topic], topic_partitions=[])  # fmt: skip


def _parts(response: Any) -> dict[uuid.UUID, set[int]]:
    assert response.assignment is not None
    return {tp.topic_id: set(tp.partitions) for tp in response.assignment.topic_partitions}


def _owned(parts: dict[uuid.UUID, set[int]]) -> list[dict[str, Any]]:
    return [{"topic_id": t, "partitions": sorted(p)} for t, p in parts.items()]


def _describe(client: WireClient, group: str) -> Any:
    body = request(ApiKey.CONSUMER_GROUP_DESCRIBE, 1,
                   {"group_ids": [group], "include_authorized_operations": False})  # fmt: skip
    return client.call(body).groups[0]


def test_heartbeat_hands_partitions_over_after_revocation(broker: BrokerProcess) -> None:
    topic, group = unique("cg"), unique("cg-group")
    create_topic(broker.bootstrap, topic, partitions=4)
    with WireClient(broker.port) as client:
        a = _join(client, group, "m1", topic)
        assert (a.error_code, a.member_epoch) == (Errors.NONE, 1)
        assert a.heartbeat_interval.total_seconds() == 5
        (topic_id,) = _parts(a)
        assert _parts(a) == {topic_id: {0, 1, 2, 3}}
        b = _join(client, group, "m2", topic)
        assert b.member_epoch == 2 and _parts(b) == {}
        r1 = _beat(client, group, "m1", 1, topic_partitions=_owned(_parts(a)))
        kept = _parts(r1)[topic_id]
        assert r1.member_epoch == 1 and len(kept) == 2
        described = _describe(client, group)
        assert (described.group_state, described.group_epoch) == ("Reconciling", 2)
        assert described.assignor_name == "uniform"
        # m1 revokes: epoch 2; then m2 gets the two m1 gave up.
        r1 = _beat(client, group, "m1", 1, topic_partitions=_owned({topic_id: kept}))
        assert r1.member_epoch == 2
        r2 = _beat(client, group, "m2", 2, topic_partitions=[])
        assert _parts(r2) == {topic_id: {0, 1, 2, 3} - kept}
        described = _describe(client, group)
        assert described.group_state == "Stable"
        names = {m.member_id: m.assignment.topic_partitions[0].topic_name
                 for m in described.members}  # fmt: skip
        assert names == {"m1": topic, "m2": topic}
        assert _beat(client, group, "m1", 7).error_code == Errors.FENCED_MEMBER_EPOCH
        assert _beat(client, group, "zz", 1).error_code == Errors.UNKNOWN_MEMBER_ID
        # v1 members name themselves (KIP-1082).
        assert _join(client, group, "", topic).error_code == Errors.INVALID_REQUEST
        left = _beat(client, group, "m2", -1)
        assert (left.error_code, left.member_epoch) == (Errors.NONE, -1)


def test_a_classic_group_is_not_a_consumer_group(broker: BrokerProcess) -> None:
    topic, group = unique("cg"), unique("classic")
    create_topic(broker.bootstrap, topic, partitions=1)
    c = consumer(broker.bootstrap, group_id=group)
    try:
        c.subscribe([topic])
        for _ in range(50):
            c.poll(0.2)
            if c.assignment():
                break
        with WireClient(broker.port) as client:
            assert _join(client, group, "m1", topic).error_code == Errors.GROUP_ID_NOT_FOUND
            assert _describe(client, group).error_code == Errors.GROUP_ID_NOT_FOUND
    finally:
        c.close()


def _commit(client: WireClient, version: int, group: str, member: str, epoch: int,
            topic: str) -> int:  # fmt: skip
    body = request(ApiKey.OFFSET_COMMIT, version, {
        "group_id": group, "generation_id_or_member_epoch": epoch, "member_id": member,
        "group_instance_id": None, "retention_time": -1,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
             "committed_metadata": ""}]}],
    })  # fmt: skip
    return int(client.call(body).topics[0].partitions[0].error_code)


def test_members_commit_with_their_member_epoch(broker: BrokerProcess) -> None:
    topic, group = unique("cg"), unique("cg-commit")
    create_topic(broker.bootstrap, topic, partitions=1)
    with WireClient(broker.port) as client:
        assert _join(client, group, "m1", topic).member_epoch == 1
        assert _commit(client, 9, group, "m1", 1, topic) == Errors.NONE
        assert _commit(client, 9, group, "m1", 0, topic) == Errors.STALE_MEMBER_EPOCH
        assert _commit(client, 9, group, "zz", 1, topic) == Errors.UNKNOWN_MEMBER_ID
        # Kafka: only OffsetCommit v9+ carries a member epoch.
        assert _commit(client, 7, group, "m1", 1, topic) == Errors.UNSUPPORTED_VERSION
        assert _commit(client, 9, group, "", -1, topic) == Errors.UNKNOWN_MEMBER_ID
        assert _beat(client, group, "m1", -1).member_epoch == -1
        # Empty, the group takes assign()-style commits.
        assert _commit(client, 9, group, "", -1, topic) == Errors.NONE


def test_a_consumer_group_is_not_a_classic_group(broker: BrokerProcess) -> None:
    topic, group = unique("cg"), unique("cg-mixed")
    create_topic(broker.bootstrap, topic, partitions=1)
    join_classic = request(ApiKey.JOIN_GROUP, 5, {
        "group_id": group, "session_timeout": 10_000, "rebalance_timeout": 10_000,
        "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    })  # fmt: skip
    with WireClient(broker.port) as client:
        assert _join(client, group, "m1", topic).error_code == Errors.NONE
        assert client.call(join_classic).error_code == Errors.INCONSISTENT_GROUP_PROTOCOL
        listed = client.call(request(ApiKey.LIST_GROUPS, 2, {}))
        assert (group, "consumer") in {(g.group_id, g.protocol_type) for g in listed.groups}
        described = client.call(request(ApiKey.DESCRIBE_GROUPS, 2, {"groups": [group]}))
        assert described.groups[0].group_state == "Dead"
        # Empty, it converts: the classic member is asked for its member id (v4+).
        assert _beat(client, group, "m1", -1).member_epoch == -1
        assert client.call(join_classic).error_code == Errors.MEMBER_ID_REQUIRED


def test_the_cli_describes_a_consumer_group(broker: BrokerProcess) -> None:
    topic, group = unique("cg"), unique("cg-cli")
    create_topic(broker.bootstrap, topic, partitions=2)
    with WireClient(broker.port) as client:
        assert _join(client, group, "m1", topic).member_epoch == 1
        described = subprocess.run(
            [sys.executable, "-m", "sluice", "groups", "describe", "--group", group,
             "--bootstrap-server", broker.bootstrap],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert described.returncode == 0, described.stderr
    assert f"Group {group} (consumer): Stable, 1 members" in described.stdout
    owners = [line.split()[-2] for line in described.stdout.splitlines()
              if line.startswith(topic)]  # fmt: skip
    assert owners == ["m1", "m1"]


def test_deleting_a_consumer_group_and_its_offsets(broker: BrokerProcess) -> None:
    topic, group = unique("cg"), unique("cg-delete")
    create_topic(broker.bootstrap, topic, partitions=1)
    delete = request(ApiKey.DELETE_GROUPS, 2, {"groups_names": [group]})
    offset_delete = request(ApiKey.OFFSET_DELETE, 0, {
        "group_id": group, "topics": [{"name": topic, "partitions": [{"partition_index": 0}]}],
    })  # fmt: skip
    with WireClient(broker.port) as client:
        assert _join(client, group, "m1", topic).member_epoch == 1
        assert _commit(client, 9, group, "m1", 1, topic) == Errors.NONE
        refused = client.call(offset_delete).topics[0].partitions[0].error_code
        assert refused == Errors.GROUP_SUBSCRIBED_TO_TOPIC
        assert client.call(delete).results[0].error_code == Errors.NON_EMPTY_GROUP
        assert _beat(client, group, "m1", -1).member_epoch == -1
        assert client.call(delete).results[0].error_code == Errors.NONE
        assert _describe(client, group).error_code == Errors.GROUP_ID_NOT_FOUND
        assert client.call(delete).results[0].error_code == Errors.GROUP_ID_NOT_FOUND
