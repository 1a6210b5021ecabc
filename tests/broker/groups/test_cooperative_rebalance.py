"""The cooperative (KIP-429) rebalance sequence of bench/bench_assignors.py, driven directly.

C1 and C2 are a stable group; C0 joins. Generation 2 revokes partitions from C1 and C2 without
handing them to C0 yet; C1 and C2 revoke them and rejoin at once, which starts generation 3.
C0 revoked nothing: like on Kafka, it learns of generation 3 only from a Heartbeat answered
REBALANCE_IN_PROGRESS, so the follow-up rebalance waits for C0's next heartbeat (up to
``heartbeat.interval.ms``, measured at 1.0 s with librdkafka) and for no timer of the
coordinator's: the join completes the moment C0 rejoins.
"""

import asyncio

from sluice.broker.groups.coordinator import GroupState
from sluice.broker.protocol.errors import Errors
from tests.broker.groups.test_coordinator import coordinator, join, run

REBALANCE_MS = 5_000  # far longer than any wait below: a timer would show


def owning(*partitions: str) -> list[tuple[str, bytes]]:
    """Cooperative-sticky metadata: the subscription carries the partitions the member owns."""
    return [("cooperative-sticky", ",".join(partitions).encode())]


async def rejoin(c, result, *partitions):
    return await join(c, result.member_id, protocols=owning(*partitions),
                      rebalance_ms=REBALANCE_MS, client=result.member_id[:2])  # fmt: skip


def test_the_follow_up_rebalance_completes_when_the_last_member_rejoins():
    async def scenario():
        c = coordinator(initial_rebalance_delay_ms=50)
        loop = asyncio.get_running_loop()
        c1, c2 = await asyncio.gather(
            join(c, client="C1", protocols=owning(), rebalance_ms=REBALANCE_MS),
            join(c, client="C2", protocols=owning(), rebalance_ms=REBALANCE_MS),
        )
        await asyncio.gather(*(c.sync("g", 1, m.member_id, {}) for m in (c1, c2)))

        # C0 joins a Stable group: the others hear of it from their heartbeats.
        c0_join = asyncio.ensure_future(
            join(c, client="C0", protocols=owning(), rebalance_ms=REBALANCE_MS)
        )
        await asyncio.sleep(0.01)
        assert c.groups["g"].state is GroupState.PREPARING_REBALANCE
        assert [c.heartbeat("g", 1, m.member_id) for m in (c1, c2)] == [
            Errors.REBALANCE_IN_PROGRESS
        ] * 2
        c1, c2 = await asyncio.gather(rejoin(c, c1, "t0p0", "t0p1"), rejoin(c, c2, "t0p2"))
        c0 = await c0_join
        assert {m.generation for m in (c0, c1, c2)} == {2}
        leader = next(m for m in (c0, c1, c2) if m.leader == m.member_id)
        syncs = [c.sync("g", 2, m.member_id, {}) for m in (c0, c1, c2) if m is not leader]
        syncs.append(c.sync("g", 2, leader.member_id, {}))
        await asyncio.gather(*syncs)

        # C0's first heartbeat of generation 2 comes right after its SyncGroup, before the
        # revoking members rejoin: nothing to report yet.
        assert c.heartbeat("g", 2, c0.member_id) == Errors.NONE
        c2_join = asyncio.ensure_future(rejoin(c, c2))  # revoked t0p2: metadata changed
        await asyncio.sleep(0.01)
        assert c.groups["g"].state is GroupState.PREPARING_REBALANCE
        c1_join = asyncio.ensure_future(rejoin(c, c1))
        await asyncio.sleep(0.3)  # C0's heartbeat interval: the group waits for C0, only
        assert not c2_join.done() and not c1_join.done()
        assert c.heartbeat("g", 2, c0.member_id) == Errors.REBALANCE_IN_PROGRESS
        started = loop.time()
        c0 = await rejoin(c, c0)
        c1, c2 = await asyncio.gather(c1_join, c2_join)
        assert loop.time() - started < 0.5 * REBALANCE_MS / 1000
        assert {m.generation for m in (c0, c1, c2)} == {3}
        assert c.groups["g"].state is GroupState.COMPLETING_REBALANCE
        c.close()

    run(scenario())
