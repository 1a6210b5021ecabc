"""A group's metadata in ``__consumer_offsets`` carries it across a coordinator failover: the
coordinator stores it at every completed rebalance (Kafka's ``storeGroup``), and a coordinator
that loads the partition (another broker's, or this one's after a restart) rebuilds each
group — a stable group keeps its generation, leader and assignments, so its members'
heartbeats, syncs and commits succeed there at once. Empty groups without offsets and deleted
groups leave tombstones, which compaction (Kafka's cleaner: the key names the group) honours.
Driven directly over real logs, a real ``OffsetStore`` and two coordinators."""

import asyncio

from sluice.broker.cluster.local_metadata import LocalMetadataStore
from sluice.broker.groups import offset_store
from sluice.broker.groups.coordinator import GroupCoordinator, GroupState
from sluice.broker.groups.offset_store import CommittedOffset, OffsetStore
from sluice.broker.groups.offsets_topic_records import (
    GroupMetadataKey,
    decode_group_metadata_value,
    decode_key,
)
from sluice.broker.log.cleaner import Cleaner
from sluice.broker.log.cleaner_manager import LogToClean
from sluice.broker.log.log_manager import LogManager
from sluice.broker.log.record_batch import iter_batches
from sluice.broker.log.records import decode_batch
from sluice.broker.protocol.errors import Errors
from sluice.common.topic_partition import TopicPartition

PROTOCOLS = [("range", b"sub-range"), ("roundrobin", b"sub-rr")]


class Coordinated:
    """One broker's view of the offsets topic: its logs, an ``OffsetStore`` that loaded every
    partition, and a ``GroupCoordinator`` wired to it as the broker wires them."""

    def __init__(self, tmp_path, partitions=1):
        self.manager = LogManager([tmp_path / "logs"])
        self.manager.startup()
        metadata = LocalMetadataStore(tmp_path / "logs", 0)
        if metadata.get(offset_store.TOPIC) is None:
            metadata.create_topic(offset_store.TOPIC, partitions, 1, {}, internal=True)
        self.logs = [self.manager.get_or_create_log(offset_store.TOPIC, p)
                     for p in range(partitions)]  # fmt: skip

        async def append(partition, batch):
            return self.logs[partition].append(batch).first_offset

        self.store = OffsetStore(partitions, append)
        self.coordinator = GroupCoordinator(
            initial_rebalance_delay_ms=50, min_session_timeout_ms=100,
            store_group=self.store.store_group,
            has_offsets=lambda g: bool(self.store.committed(g)),
        )  # fmt: skip
        for p, partition_log in enumerate(self.logs):
            self.store.load_partition(p, partition_log)
            self.coordinator.load_groups(self.store.groups_in(p))

    def close(self):
        self.coordinator.close()
        self.manager.shutdown()


async def join(c, member_id="", *, client, instance=None, session_ms=10_000, group="g"):
    result = await c.join(
        group, member_id, group_instance_id=instance, client_id=client,
        client_host=f"/10.0.0.{len(client)}", session_timeout_ms=session_ms,
        rebalance_timeout_ms=2_000, protocol_type="consumer", protocols=PROTOCOLS,
        require_known_member_id=True,
    )  # fmt: skip
    if result.error == Errors.MEMBER_ID_REQUIRED:
        return await join(c, result.member_id, client=client, instance=instance,
                          session_ms=session_ms, group=group)  # fmt: skip
    return result


async def stable_group(c):
    """Members a (dynamic) and b (static, instance "ib"), Stable at generation 1 with
    assignments A and B; their join results, leader first."""
    a, b = await asyncio.gather(join(c, client="client-a"),
                                join(c, client="client-b", instance="ib"))  # fmt: skip
    leader, follower = (a, b) if a.leader == a.member_id else (b, a)
    plan = {a.member_id: b"A", b.member_id: b"B"}
    await asyncio.gather(c.sync("g", 1, leader.member_id, plan),
                         c.sync("g", 1, follower.member_id, {}))  # fmt: skip
    assert c.groups["g"].state is GroupState.STABLE
    await asyncio.sleep(0)  # nothing stored later than the sync's own write
    return leader, follower, a, b


def metadata_records(partition_log):
    """(group, value or None) of every group-metadata record of the log, in order."""
    out = []
    offset = partition_log.log_start_offset
    while offset < partition_log.log_end_offset:
        raw = partition_log.read(offset, 1 << 20, upper_bound="log_end").slice.read()
        for header in iter_batches(raw):
            for record in decode_batch(raw, header.position):
                key = decode_key(record.key)
                if isinstance(key, GroupMetadataKey):
                    value = None if record.value is None else decode_group_metadata_value(
                        record.value
                    )  # fmt: skip
                    out.append((key.group, value))
            offset = header.next_offset
    return out


def test_a_stable_group_keeps_generation_and_assignments_at_the_new_coordinator(tmp_path):
    async def scenario():
        old = Coordinated(tmp_path)
        leader, follower, a, b = await stable_group(old.coordinator)
        await old.store.commit("g", [("t", 0, CommittedOffset(5, -1, None, 1))])
        ((group, stored),) = metadata_records(old.logs[0])
        assert group == "g" and stored.generation == 1 and stored.leader == leader.member_id
        assert {m.client_id for m in stored.members} == {"client-a", "client-b"}
        old.close()  # the coordinator's broker is gone; another loads the partition

        new = Coordinated(tmp_path)
        c = new.coordinator
        group = c.groups["g"]
        assert (group.state, group.generation, group.protocol_name, group.leader) == (
            GroupState.STABLE, 1, "range", leader.member_id,
        )  # fmt: skip
        assert group.static_members == {"ib": b.member_id}
        for m in (a, b):
            assert c.heartbeat("g", 1, m.member_id) == Errors.NONE
            assert c.validate_commit("g", 1, m.member_id) == Errors.NONE
        assert c.validate_commit("g", 1, a.member_id, transactional=True) == Errors.NONE
        assert (await c.sync("g", 1, a.member_id, {})).assignment == b"A"
        assert (await c.sync("g", 1, b.member_id, {})).assignment == b"B"
        assert c.heartbeat("g", 0, a.member_id) == Errors.ILLEGAL_GENERATION
        assert c.heartbeat("g", 1, "ghost") == Errors.UNKNOWN_MEMBER_ID
        # The static member restarting replaces its id without a rebalance, as before.
        again = await join(c, client="client-b2", instance="ib")
        assert (again.error, again.generation) == (Errors.NONE, 1)
        assert c.heartbeat("g", 1, b.member_id) == Errors.FENCED_INSTANCE_ID
        # A newcomer rebalances the loaded group: the old members rejoin with their ids.
        newcomer = asyncio.ensure_future(join(c, client="client-c"))
        await asyncio.sleep(0.05)
        assert c.heartbeat("g", 1, a.member_id) == Errors.REBALANCE_IN_PROGRESS
        rejoined = await asyncio.gather(join(c, a.member_id, client="client-a"),
                                        join(c, again.member_id, client="client-b2",
                                             instance="ib"), newcomer)  # fmt: skip
        assert {r.generation for r in rejoined} == {2}
        assert new.store.committed("g")[("t", 0)].offset == 5
        new.close()

    asyncio.run(scenario())


def test_the_loaded_sessions_start_at_the_load_and_expire_without_heartbeats(tmp_path):
    async def scenario():
        old = Coordinated(tmp_path)
        a = await join(old.coordinator, client="client-a", session_ms=300)
        await old.coordinator.sync("g", 1, a.member_id, {a.member_id: b"A"})
        old.close()  # the coordinator dies; nobody expires the session meanwhile
        await asyncio.sleep(0.5)  # older than a session: the load starts it afresh
        new = Coordinated(tmp_path)
        assert new.coordinator.heartbeat("g", 1, a.member_id) == Errors.NONE
        await asyncio.sleep(0.8)
        group = new.coordinator.groups["g"]
        assert group.members == {} and group.state is GroupState.EMPTY
        assert group.generation == 2
        await asyncio.sleep(0.05)  # the empty group's record is written without waiting
        assert metadata_records(new.logs[0])[-1][1].members == ()
        new.close()

    asyncio.run(scenario())


def test_unloading_answers_waiting_members_not_coordinator(tmp_path):
    async def scenario():
        node = Coordinated(tmp_path, partitions=2)
        c = node.coordinator
        a, b = await asyncio.gather(join(c, client="client-a"), join(c, client="client-b"))
        follower = b if a.leader == a.member_id else a
        waiting = asyncio.ensure_future(c.sync("g", 1, follower.member_id, {}))
        await asyncio.sleep(0.01)
        here = node.store.partition_for("g")
        assert c.unload_groups(lambda g: node.store.partition_for(g) == here) == ["g"]
        assert (await waiting).error == Errors.NOT_COORDINATOR
        assert "g" not in c.groups
        assert c.heartbeat("g", 1, a.member_id) == Errors.UNKNOWN_MEMBER_ID
        node.close()

    asyncio.run(scenario())


def test_empty_groups_without_offsets_and_deleted_groups_leave_tombstones(tmp_path):
    async def scenario():
        node = Coordinated(tmp_path)
        c = node.coordinator
        for group in ("kept", "idle", "deleted"):
            m = await join(c, client="client", group=group)
            await c.sync(group, 1, m.member_id, {})
            assert c.leave(group, [m.member_id])[1] == [Errors.NONE]
        await node.store.commit("kept", [("t", 0, CommittedOffset(1, -1, None, 1))])
        assert c.delete_group("deleted") == Errors.NONE
        assert c.remove_empty_groups() == ["idle"]
        await asyncio.sleep(0.05)
        assert set(c.groups) == {"kept"}
        last = {}
        for group, value in metadata_records(node.logs[0]):
            last[group] = value
        assert last["idle"] is None and last["deleted"] is None
        assert last["kept"].members == () and last["kept"].generation == 2
        node.close()
        again = Coordinated(tmp_path)
        assert set(again.coordinator.groups) == {"kept"}
        assert again.coordinator.groups["kept"].state is GroupState.EMPTY
        assert again.coordinator.groups["kept"].generation == 2
        again.close()

    asyncio.run(scenario())


def test_compaction_keeps_each_groups_last_record_and_honours_tombstones(tmp_path):
    async def scenario():
        node = Coordinated(tmp_path)
        c = node.coordinator
        leader, follower, a, b = await stable_group(c)
        for generation in (2, 3):  # two more rebalances: three records of "g"
            rejoin = await asyncio.gather(join(c, a.member_id, client="client-a"),
                                          join(c, b.member_id, client="client-b",
                                               instance="ib"))  # fmt: skip
            first = rejoin[0] if rejoin[0].leader == rejoin[0].member_id else rejoin[1]
            other = rejoin[1] if first is rejoin[0] else rejoin[0]
            assert first.generation == generation
            await asyncio.gather(
                c.sync("g", generation, first.member_id,
                       {a.member_id: b"A%d" % generation, b.member_id: b"B%d" % generation}),
                c.sync("g", generation, other.member_id, {}),
            )  # fmt: skip
        gone = await join(c, client="client-z", group="gone")
        await c.sync("gone", 1, gone.member_id, {})
        c.leave("gone", [gone.member_id])
        await asyncio.sleep(0.05)
        assert c.delete_group("gone") == Errors.NONE
        await asyncio.sleep(0.05)
        partition_log = node.logs[0]
        partition_log.roll()
        partition_log.high_watermark = partition_log.log_end_offset
        now = 1_900_000_000_000
        Cleaner(1 << 16).clean(LogToClean.of(TopicPartition(offset_store.TOPIC, 0),
                                             partition_log, None, now), now)  # fmt: skip
        records = metadata_records(partition_log)
        assert [(g, v.generation) for g, v in records if g == "g"] == [("g", 3)]
        assert ("gone", None) in records  # a tombstone stays until its delete horizon
        day = 24 * 3600 * 1000
        later = now + 2 * day
        Cleaner(1 << 16).clean(LogToClean.of(TopicPartition(offset_store.TOPIC, 0),
                                             partition_log, None, later), later)  # fmt: skip
        assert [g for g, _ in metadata_records(partition_log)] == ["g"]
        node.close()
        again = Coordinated(tmp_path)
        group = again.coordinator.groups["g"]
        assert group.generation == 3 and set(again.coordinator.groups) == {"g"}
        assert {m.assignment for m in group.members.values()} == {b"A3", b"B3"}
        again.close()

    asyncio.run(scenario())
