"""Static membership (KIP-345) in the group coordinator, driven directly on an event loop: a
known instance rejoining replaces its old member id without a rebalance, the old id is fenced,
LeaveGroup by instance id, a static member's session timeout, the stored group metadata."""

import asyncio

from sluice.broker.groups.coordinator import GroupCoordinator, GroupState
from sluice.broker.groups.offset_store import OffsetCommitFailedError
from sluice.broker.protocol.errors import Errors

PROTOCOLS = [("range", b"meta-range")]


def coordinator(**kw):
    kw.setdefault("initial_rebalance_delay_ms", 50)
    kw.setdefault("min_session_timeout_ms", 100)
    return GroupCoordinator(**kw)


async def join(c, instance, member_id="", session_ms=10_000, protocols=PROTOCOLS, group="g"):
    return await c.join(
        group, member_id, group_instance_id=instance, client_id=f"client-{instance}",
        client_host="/127.0.0.1", session_timeout_ms=session_ms, rebalance_timeout_ms=1_000,
        protocol_type="consumer", protocols=protocols, require_known_member_id=True,
    )  # fmt: skip


async def stable_pair(c):
    """Two static members a and b, Stable at generation 1; (a's result, b's result)."""
    a, b = await asyncio.gather(join(c, "a"), join(c, "b"))
    assert a.error == b.error == Errors.NONE and a.generation == b.generation == 1
    leader, follower = (a, b) if a.member_id == a.leader else (b, a)
    plan = {leader.member_id: b"L", follower.member_id: b"F"}
    await asyncio.gather(
        c.sync("g", 1, leader.member_id, plan), c.sync("g", 1, follower.member_id, {})
    )
    assert c.groups["g"].state is GroupState.STABLE
    return a, b


def test_static_members_need_no_member_id_round_trip():
    async def scenario():
        c = coordinator()
        result = await join(c, "a")
        assert result.error == Errors.NONE  # no MEMBER_ID_REQUIRED
        assert result.member_id.startswith("a-")
        assert result.members == ((result.member_id, "a", b"meta-range"),)
        assert c.groups["g"].static_members == {"a": result.member_id}
        c.close()

    asyncio.run(scenario())


def test_a_restarted_static_member_replaces_its_old_id_without_a_rebalance():
    async def scenario():
        c = coordinator()
        a, b = await stable_pair(c)
        group = c.groups["g"]
        before = {m.member_id: m.assignment for m in group.members.values()}
        again = await join(c, "a")  # a restarted: no member id, same instance id
        assert again.error == Errors.NONE
        assert again.member_id != a.member_id and again.member_id.startswith("a-")
        assert again.generation == 1  # the same generation: no rebalance
        assert again.leader == a.leader  # the old leader id: the member never assigns
        assert again.members == ()
        assert group.state is GroupState.STABLE and group.generation == 1
        sync = await c.sync("g", 1, again.member_id, {})
        assert sync == type(sync)(Errors.NONE, before[a.member_id])  # its old assignment
        # b keeps going undisturbed.
        assert c.heartbeat("g", 1, b.member_id) == Errors.NONE
        assert c.groups["g"].members[b.member_id].assignment == before[b.member_id]
        if a.leader == a.member_id:
            assert group.leader == again.member_id  # leadership moved with the instance
        c.close()

    asyncio.run(scenario())


def test_the_replaced_id_is_fenced_everywhere():
    async def scenario():
        c = coordinator()
        a, _b = await stable_pair(c)
        again = await join(c, "a")
        old = a.member_id
        # Without the instance id in the request (the coordinator remembers the replaced id)…
        assert c.heartbeat("g", 1, old) == Errors.FENCED_INSTANCE_ID
        assert (await c.sync("g", 1, old, {})).error == Errors.FENCED_INSTANCE_ID
        assert c.validate_commit("g", 1, old) == Errors.FENCED_INSTANCE_ID
        assert (await join(c, "a", member_id=old)).error == Errors.FENCED_INSTANCE_ID
        # … and with it, as Kafka checks it.
        assert c.heartbeat("g", 1, old, "a") == Errors.FENCED_INSTANCE_ID
        assert c.validate_commit("g", 1, "someone-else", "a") == Errors.FENCED_INSTANCE_ID
        assert c.heartbeat("g", 1, again.member_id, "a") == Errors.NONE
        assert c.validate_commit("g", 1, again.member_id, "a") == Errors.NONE
        assert c.leave("g", [old], ["a"]) == (Errors.NONE, [Errors.FENCED_INSTANCE_ID])
        c.close()

    asyncio.run(scenario())


def test_a_duplicate_waiting_in_a_join_is_fenced():
    async def scenario():
        c = coordinator()
        a, b = await stable_pair(c)
        (leader, leader_id), (follower, follower_id) = sorted(
            [("a", a.member_id), ("b", b.member_id)], key=lambda m: m[1] != a.leader
        )
        # The follower rejoins with new metadata (a rebalance) and waits for the leader …
        follower_join = asyncio.ensure_future(
            join(c, follower, member_id=follower_id, protocols=[("range", b"new")])
        )
        await asyncio.sleep(0.01)
        # … and a second process with the follower's instance id starts: the waiting join is
        # fenced, the newcomer takes its place in the rebalance.
        duplicate = asyncio.ensure_future(join(c, follower))
        assert (await follower_join).error == Errors.FENCED_INSTANCE_ID
        assert c.groups["g"].state is GroupState.PREPARING_REBALANCE
        d, again = await asyncio.gather(duplicate, join(c, leader, member_id=leader_id))
        assert d.error == again.error == Errors.NONE and d.generation == again.generation == 2
        assert set(c.groups["g"].members) == {d.member_id, leader_id}
        c.close()

    asyncio.run(scenario())


def test_leave_by_instance_id_rebalances():
    async def scenario():
        c = coordinator()
        a, b = await stable_pair(c)
        assert c.leave("g", [""], ["nobody"]) == (Errors.NONE, [Errors.UNKNOWN_MEMBER_ID])
        assert c.leave("g", [""], ["a"]) == (Errors.NONE, [Errors.NONE])
        group = c.groups["g"]
        assert a.member_id not in group.members and "a" not in group.static_members
        assert group.state is GroupState.PREPARING_REBALANCE
        assert c.heartbeat("g", 1, b.member_id) == Errors.REBALANCE_IN_PROGRESS
        c.close()

    asyncio.run(scenario())


def test_a_static_member_that_does_not_rejoin_stays_until_its_session_expires():
    async def scenario():
        c = coordinator()
        a, b = await stable_pair(c)
        # b rejoins (a rebalance), a does not: a stays in the group for the next generation.
        c.groups["g"].members[a.member_id].session_timeout_ms = 1_500
        result = await join(c, "b", member_id=b.member_id, protocols=[("range", b"new")])
        assert result.error == Errors.NONE and result.generation == 2
        group = c.groups["g"]
        assert set(group.members) == {a.member_id, b.member_id}
        # The session timeout (not the rebalance) removes it, and the group rebalances.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while a.member_id in group.members and loop.time() < deadline:
            c.heartbeat("g", group.generation, b.member_id)
            await asyncio.sleep(0.1)
        assert a.member_id not in group.members and "a" not in group.static_members
        assert group.state is GroupState.PREPARING_REBALANCE
        c.close()

    asyncio.run(scenario())


def test_a_static_rejoin_keeping_the_selected_protocol_does_not_rebalance():
    async def scenario():
        c = coordinator()
        a, b = await stable_pair(c)
        others = [("roundrobin", b"rr"), ("range", b"meta-range")]
        pending = asyncio.ensure_future(join(c, "a", protocols=others))
        await asyncio.sleep(0.05)
        # range is still the only common protocol: the selected one stays, no rebalance
        assert pending.done() and pending.result().generation == 1
        c.close()

    asyncio.run(scenario())


def test_group_metadata_is_stored_at_sync_and_static_replacement():
    async def scenario():
        stored = []

        async def store(group_id, value):
            stored.append((group_id, value))

        c = coordinator(store_group=store)
        a, _b = await stable_pair(c)
        assert len(stored) == 1
        group_id, value = stored[0]
        assert group_id == "g" and value.generation == 1 and value.protocol == "range"
        members = {m.group_instance_id: m for m in value.members}
        assert set(members) == {"a", "b"}
        assert {m.assignment for m in value.members} == {b"L", b"F"}
        assert members["a"].subscription == b"meta-range"
        again = await join(c, "a")
        assert len(stored) == 2
        assert {m.member_id for m in stored[1][1].members} >= {again.member_id}
        c.close()

    asyncio.run(scenario())


def test_a_failed_store_undoes_the_static_replacement():
    async def scenario():
        fail = False

        async def store(_group_id, _value):
            if fail:
                raise OffsetCommitFailedError(Errors.NOT_LEADER_OR_FOLLOWER, "moved")

        c = coordinator(store_group=store)
        a, _b = await stable_pair(c)
        fail = True
        again = await join(c, "a")
        assert again.error == Errors.NOT_COORDINATOR
        group = c.groups["g"]
        assert group.static_members["a"] == a.member_id and a.member_id in group.members
        assert c.heartbeat("g", 1, a.member_id) == Errors.NONE
        c.close()

    asyncio.run(scenario())
