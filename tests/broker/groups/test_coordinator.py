"""The group coordinator's state machine, driven directly on an event loop."""

import asyncio
import functools

from sluice.broker.groups.coordinator import GroupCoordinator, GroupState
from sluice.broker.protocol.errors import Errors

PROTOCOLS = [("range", b"meta-range"), ("roundrobin", b"meta-rr")]


def coordinator(**kw):
    kw.setdefault("initial_rebalance_delay_ms", 100)
    kw.setdefault("min_session_timeout_ms", 100)
    return GroupCoordinator(**kw)


async def join(c, member_id="", protocols=PROTOCOLS, session_ms=10_000, rebalance_ms=2_000,
               client="c", require_known=True, group="g"):  # fmt: skip
    result = await c.join(
        group, member_id, group_instance_id=None, client_id=client, client_host="/127.0.0.1",
        session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
        protocol_type="consumer", protocols=protocols, require_known_member_id=require_known,
    )  # fmt: skip
    if result.error == Errors.MEMBER_ID_REQUIRED:
        return await join(c, result.member_id, protocols, session_ms, rebalance_ms, client,
                          require_known, group)  # fmt: skip
    return result


def run(coro):
    return asyncio.run(coro)


def test_one_member_joins_syncs_and_heartbeats():
    async def scenario():
        c = coordinator()
        first = await c.join("g", "", group_instance_id=None, client_id="c", client_host="h",
                             session_timeout_ms=10_000, rebalance_timeout_ms=1000,
                             protocol_type="consumer", protocols=PROTOCOLS,
                             require_known_member_id=True)  # fmt: skip
        assert first.error == Errors.MEMBER_ID_REQUIRED and first.member_id.startswith("c-")
        loop = asyncio.get_running_loop()
        started = loop.time()
        result = await join(c, first.member_id)
        waited = loop.time() - started
        assert 0.09 < waited < 1.0  # the initial delay, not the rebalance timeout
        assert (result.error, result.generation, result.leader) == (Errors.NONE, 1, first.member_id)
        assert result.protocol_name == "range"
        assert result.members == ((first.member_id, None, b"meta-range"),)
        sync = await c.sync("g", 1, first.member_id, {first.member_id: b"assignment"})
        assert (sync.error, sync.assignment) == (Errors.NONE, b"assignment")
        assert c.groups["g"].state is GroupState.STABLE
        assert c.heartbeat("g", 1, first.member_id) == Errors.NONE
        assert c.heartbeat("g", 0, first.member_id) == Errors.ILLEGAL_GENERATION
        assert c.heartbeat("g", 1, "nobody") == Errors.UNKNOWN_MEMBER_ID
        c.close()

    run(scenario())


def test_two_members_share_a_generation_and_the_follower_waits_for_the_leader():
    async def scenario():
        c = coordinator()
        a, b = await asyncio.gather(join(c, client="a"), join(c, client="b"))
        assert a.generation == b.generation == 1 and a.leader == b.leader
        leader, follower = (a, b) if a.leader == a.member_id else (b, a)
        assert len(leader.members) == 2 and follower.members == ()
        follower_sync = asyncio.ensure_future(c.sync("g", 1, follower.member_id, {}))
        await asyncio.sleep(0.05)
        assert not follower_sync.done()  # waits for the leader's assignment
        await c.sync("g", 1, leader.member_id,
                     {leader.member_id: b"L", follower.member_id: b"F"})  # fmt: skip
        assert (await follower_sync).assignment == b"F"
        c.close()

    run(scenario())


def test_a_new_member_triggers_a_rebalance_that_existing_members_join():
    async def scenario():
        c = coordinator()
        a = await join(c, client="a")
        await c.sync("g", 1, a.member_id, {a.member_id: b"x"})
        newcomer = asyncio.ensure_future(join(c, client="b"))
        await asyncio.sleep(0.05)
        assert c.heartbeat("g", 1, a.member_id) == Errors.REBALANCE_IN_PROGRESS
        again = await join(c, a.member_id, client="a")
        b = await newcomer
        assert again.generation == b.generation == 2
        # generation 2 awaits its assignment: commits wait; then the old generation is stale
        assert c.validate_commit("g", 2, a.member_id) == Errors.REBALANCE_IN_PROGRESS
        leader = again if again.leader == again.member_id else b
        await asyncio.gather(c.sync("g", 2, a.member_id, {}), c.sync("g", 2, b.member_id, {}))
        assert c.validate_commit("g", 1, a.member_id) == Errors.ILLEGAL_GENERATION
        assert leader.members
        c.close()

    run(scenario())


def test_members_that_do_not_rejoin_are_removed_at_the_rebalance_timeout():
    async def scenario():
        c = coordinator()
        a, b = await asyncio.gather(join(c, client="a", rebalance_ms=300),
                                    join(c, client="b", rebalance_ms=300))  # fmt: skip
        leader = a if a.leader == a.member_id else b
        await c.sync("g", 1, leader.member_id, {})
        # a third member arrives; only it and `a` rejoin
        third = asyncio.ensure_future(join(c, client="c", rebalance_ms=300))
        await asyncio.sleep(0.01)
        rejoin = await join(c, a.member_id, client="a", rebalance_ms=300)
        await third
        assert rejoin.generation == 2
        assert set(c.groups["g"].members) == {a.member_id, (await third).member_id}
        c.close()

    run(scenario())


def test_leave_and_expiry():
    async def scenario():
        c = coordinator()
        a, b = await asyncio.gather(join(c, client="a", session_ms=300),
                                    join(c, client="b", session_ms=300))  # fmt: skip
        leader = a if a.leader == a.member_id else b
        other = b if leader is a else a
        await asyncio.gather(
            c.sync("g", 1, leader.member_id, {}), c.sync("g", 1, other.member_id, {})
        )
        assert c.leave("g", [other.member_id]) == (Errors.NONE, [Errors.NONE])
        assert c.groups["g"].state is GroupState.PREPARING_REBALANCE
        again = await join(c, leader.member_id, client="a", session_ms=300)
        assert again.generation == 2
        await c.sync("g", 2, leader.member_id, {})
        await asyncio.sleep(0.7)  # no heartbeats: the session expires
        assert c.groups["g"].members == {}
        assert c.groups["g"].state is GroupState.EMPTY
        c.close()

    run(scenario())


def test_a_session_ends_when_it_is_due_not_a_tick_later():
    # Kafka's DelayedHeartbeat completes at the deadline; librdkafka's test 0081 deletes a
    # static member's group one session timeout after its last commit and expects it Empty.
    async def scenario():
        c = coordinator()
        a = await join(c, client="a", session_ms=600)
        await c.sync("g", 1, a.member_id, {})
        assert c.heartbeat("g", 1, a.member_id) == Errors.NONE
        # The expiry task sleeps until this deadline (at most a tick), not a whole tick past it.
        member = c.groups["g"].members[a.member_id]
        assert c._next_deadline() == member.last_heartbeat + 0.6
        while c.groups["g"].members:  # ended by the expiry task alone
            await asyncio.sleep(0.005)
        assert c.groups["g"].state is GroupState.EMPTY
        assert c._now() >= member.last_heartbeat + 0.6
        # A DeleteGroups right after the deadline finds the session ended, whenever the
        # expiry task runs next.
        b = await join(c, client="b", session_ms=300)
        await c.sync("g", 3, b.member_id, {})
        c._expiry_task.cancel()
        await asyncio.sleep(0.35)
        assert c.delete_group("g") == Errors.NONE
        c.close()

    run(scenario())


def test_protocol_and_session_checks():
    async def scenario():
        c = coordinator()
        a = await join(c, client="a")
        bad = await join(c, client="b", protocols=[("sticky", b"")])
        assert bad.error == Errors.INCONSISTENT_GROUP_PROTOCOL
        assert (await join(c, client="b", session_ms=1)).error == Errors.INVALID_SESSION_TIMEOUT
        assert (await join(c, "ghost", client="b")).error == Errors.UNKNOWN_MEMBER_ID
        assert a.error == Errors.NONE
        c.close()

    run(scenario())


def test_commit_validation():
    async def scenario():
        c = coordinator()
        assert c.validate_commit("none", -1, "") == Errors.NONE  # simple (assign()) commits
        assert c.validate_commit("none", 3, "m") == Errors.ILLEGAL_GENERATION
        a = await join(c, client="a")
        assert (
            c.validate_commit("g", 1, a.member_id) == Errors.REBALANCE_IN_PROGRESS
        )  # awaiting sync
        await c.sync("g", 1, a.member_id, {})
        assert c.validate_commit("g", 1, a.member_id) == Errors.NONE
        assert c.validate_commit("g", 1, "other") == Errors.UNKNOWN_MEMBER_ID
        assert c.validate_commit("g", -1, "") == Errors.UNKNOWN_MEMBER_ID
        c.close()

    run(scenario())


def test_a_member_rejoining_unchanged_while_the_assignment_is_pending_gets_the_generation():
    # Kafka's classicGroupJoinExistingMember: in CompletingRebalance the same metadata (a lost
    # JoinGroup response) returns the current generation, to the leader too; once Stable the
    # leader's join rebalances and a follower's unchanged join does not.
    async def scenario():
        c = coordinator()
        a, b = await asyncio.gather(join(c, client="a"), join(c, client="b"))
        leader, follower = (a, b) if a.leader == a.member_id else (b, a)
        again = await asyncio.wait_for(join(c, leader.member_id), 1.0)
        assert (again.error, again.generation, again.members) == (Errors.NONE, 1, leader.members)
        assert c.groups["g"].state is GroupState.COMPLETING_REBALANCE
        await asyncio.gather(c.sync("g", 1, follower.member_id, {}),
                             c.sync("g", 1, leader.member_id, {}))  # fmt: skip
        assert (await join(c, follower.member_id)).generation == 1
        assert c.groups["g"].state is GroupState.STABLE
        leader_join = asyncio.ensure_future(join(c, leader.member_id))
        await asyncio.sleep(0.01)
        assert c.groups["g"].state is GroupState.PREPARING_REBALANCE
        assert c.heartbeat("g", 1, follower.member_id) == Errors.REBALANCE_IN_PROGRESS
        await join(c, follower.member_id)
        assert (await leader_join).generation == 2
        c.close()

    run(scenario())


def test_commit_checks_member_and_generation_before_the_rebalance_state():
    # Kafka's validateOffsetCommit: unknown member, then generation, then (plain commits only)
    # CompletingRebalance. librdkafka's test 0113 commits with the old generation during a
    # rebalance and expects ILLEGAL_GENERATION, not REBALANCE_IN_PROGRESS.
    async def scenario():
        c = coordinator()
        a = await join(c, client="a")
        await c.sync("g", 1, a.member_id, {a.member_id: b"x"})
        newcomer = asyncio.ensure_future(join(c, client="b"))
        await asyncio.sleep(0.05)
        assert c.groups["g"].state is GroupState.PREPARING_REBALANCE
        # PreparingRebalance: the current generation may still commit (revoke callbacks)
        assert c.validate_commit("g", 1, a.member_id) == Errors.NONE
        assert c.validate_commit("g", 1, a.member_id, transactional=True) == Errors.NONE
        again = await join(c, a.member_id, client="a")
        b = await newcomer
        assert c.groups["g"].state is GroupState.COMPLETING_REBALANCE
        for transactional in (False, True):
            check = functools.partial(c.validate_commit, transactional=transactional)
            assert check("g", 1, a.member_id) == Errors.ILLEGAL_GENERATION  # stale generation
            assert check("g", 2, "ghost") == Errors.UNKNOWN_MEMBER_ID
            assert check("g", 1, "ghost") == Errors.UNKNOWN_MEMBER_ID  # member before generation
            assert check("g", 3, b.member_id) == Errors.ILLEGAL_GENERATION
        assert c.validate_commit("g", 2, again.member_id) == Errors.REBALANCE_IN_PROGRESS
        # A transactional commit of the current generation is not held back by the state.
        assert c.validate_commit("g", 2, again.member_id, transactional=True) == Errors.NONE
        # No member and no generation (OffsetCommit v0/v1, TxnOffsetCommit v0-v2).
        assert c.validate_commit("g", -1, "") == Errors.UNKNOWN_MEMBER_ID
        assert c.validate_commit("g", -1, "", transactional=True) == Errors.NONE
        # A member id with generation -1 is checked like any member's.
        assert c.validate_commit("g", -1, again.member_id) == Errors.ILLEGAL_GENERATION
        await asyncio.gather(c.sync("g", 2, a.member_id, {}), c.sync("g", 2, b.member_id, {}))
        assert c.validate_commit("g", 2, again.member_id) == Errors.NONE
        c.close()

    run(scenario())


def test_a_commit_counts_as_a_heartbeat_and_an_empty_group_takes_simple_commits():
    async def scenario():
        c = coordinator()
        assert c.validate_commit("none", 0, "m", transactional=True) == Errors.NONE
        a = await join(c, client="a", session_ms=400)
        await c.sync("g", 1, a.member_id, {})
        for _ in range(4):  # 0.8 s > the session timeout: only the commits keep it alive
            await asyncio.sleep(0.2)
            assert c.validate_commit("g", 1, a.member_id) == Errors.NONE
        assert a.member_id in c.groups["g"].members
        assert c.leave("g", [a.member_id]) == (Errors.NONE, [Errors.NONE])
        assert c.groups["g"].state is GroupState.EMPTY
        assert c.validate_commit("g", -1, "") == Errors.NONE
        assert c.validate_commit("g", 1, a.member_id) == Errors.UNKNOWN_MEMBER_ID
        c.close()

    run(scenario())
