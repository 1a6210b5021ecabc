"""The controller: replica assignment and leader election as pure functions, then election,
topic creation, broker loss and return, failover and deletion against a real ZooKeeper."""

from __future__ import annotations

import logging
import random
import threading
from collections import Counter
from typing import Any

import pytest
from kazoo.client import KazooClient

from sluice.broker.cluster import controller as controller_module
from sluice.broker.cluster.controller import (
    Controller,
    ControllerMovedError,
    assign_replicas_to_brokers,
    elect_leader,
    write_partition_state,
)
from sluice.broker.cluster.topic_metadata import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    TopicExistsError,
    UnknownTopicError,
)
from sluice.broker.cluster.zk_data import (
    NO_LEADER,
    ControllerEpochZNode,
    ControllerZNode,
    PartitionState,
    TopicPartitionStateZNode,
    TopicZNode,
)
from sluice.testing.net import wait_until
from sluice.testing.zookeeper import expire_session, kazoo_client
from tests.broker.cluster import SimCluster


def zk_state(zk: KazooClient, topic: str, partition: int) -> PartitionState | None:
    path = TopicPartitionStateZNode.path(topic, partition)
    if zk.exists(path) is None:
        return None
    data, stat = zk.get(path)
    return TopicPartitionStateZNode.decode(data, stat.version)


def all_states(zk: KazooClient, topic: str, partitions: int) -> dict[int, PartitionState] | None:
    states = {p: zk_state(zk, topic, p) for p in range(partitions)}
    return None if any(s is None for s in states.values()) else states  # type: ignore[misc]


# -- replica assignment ------------------------------------------------------------------------


def test_assignment_spreads_leaders_and_followers() -> None:
    brokers = {1: None, 2: None, 3: None}
    assignment = assign_replicas_to_brokers(brokers, 6, 3, rng=random.Random(7))
    assert sorted(assignment) == list(range(6))
    assert all(sorted(r) == [1, 2, 3] for r in assignment.values())
    assert Counter(r[0] for r in assignment.values()) == {1: 2, 2: 2, 3: 2}
    # consecutive partitions lead on consecutive brokers (round robin)
    order = sorted(brokers)
    firsts = [order.index(assignment[p][0]) for p in range(6)]
    assert all((b - a) % 3 == 1 for a, b in zip(firsts, firsts[1:], strict=False))


def test_assignment_matches_kafkas_documented_example() -> None:
    # AdminUtils' comment: 5 brokers, 10 partitions, start index 0, shift 0 → p0 = 0,1,2 ...
    class Fixed(random.Random):
        def randrange(self, *args: object, **kwargs: object) -> int:
            return 0

    got = assign_replicas_to_brokers(dict.fromkeys(range(5)), 10, 3, rng=Fixed())
    assert got[0] == (0, 1, 2) and got[4] == (4, 0, 1)
    assert got[5] == (0, 2, 3) and got[9] == (4, 1, 2)  # second round shifts the followers


def test_assignment_rack_aware_puts_replicas_on_distinct_racks() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    assignment = assign_replicas_to_brokers(racks, 12, 3, rng=random.Random(1))
    for replicas in assignment.values():
        assert len(set(replicas)) == 3
        assert {racks[b] for b in replicas} == {"a", "b", "c"}


def test_assignment_rejects_bad_counts() -> None:
    with pytest.raises(InvalidReplicationFactorError, match="larger than the 3 available"):
        assign_replicas_to_brokers(dict.fromkeys([1, 2, 3]), 1, 4)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas_to_brokers(dict.fromkeys([1]), 1, 0)
    with pytest.raises(InvalidPartitionsError):
        assign_replicas_to_brokers(dict.fromkeys([1]), 0, 1)


# -- leader election ---------------------------------------------------------------------------


def st(leader: int, epoch: int, isr: tuple[int, ...]) -> PartitionState:
    return PartitionState(leader, epoch, isr, controller_epoch=1, zk_version=0)


@pytest.mark.parametrize(
    ("state", "replicas", "live", "unclean", "expected"),
    [
        (st(1, 3, (1, 2, 3)), (1, 2, 3), {1, 2, 3}, False, None),
        # follower died: shrink the ISR, same leader and epoch
        (st(1, 3, (1, 2, 3)), (1, 2, 3), {1, 3}, False, (1, 3, (1, 3))),
        # leader died: next replica in assignment order that is in the ISR
        (st(1, 3, (1, 3)), (1, 2, 3), {2, 3}, False, (3, 4, (3,))),
        # last ISR member died: offline, the ISR is kept
        (st(1, 3, (1,)), (1, 2), {2}, False, (NO_LEADER, 4, (1,))),
        # ... and stays so while only out-of-sync replicas are alive
        (st(NO_LEADER, 4, (1,)), (1, 2), {2}, False, None),
        # the ISR member returns: it leads again
        (st(NO_LEADER, 4, (1,)), (1, 2), {1, 2}, False, (1, 5, (1,))),
        # unclean election takes any live replica
        (st(NO_LEADER, 4, (1,)), (1, 2), {2}, True, (2, 5, (2,))),
        (st(1, 3, (1,)), (1, 2), {2}, True, (2, 4, (2,))),
        # nobody alive at all
        (st(1, 3, (1, 2)), (1, 2), set(), True, (NO_LEADER, 4, (1, 2))),
    ],
)
def test_elect_leader(
    state: PartitionState,
    replicas: tuple[int, ...],
    live: set[int],
    unclean: bool,
    expected: tuple[int, int, tuple[int, ...]] | None,
) -> None:
    assert elect_leader(state, replicas, live, unclean=unclean) == expected


# -- election ----------------------------------------------------------------------------------


def test_exactly_one_controller_and_failover_fences_the_zombie(
    cluster: SimCluster, zk_client: KazooClient
) -> None:
    cluster.start(1, 2, 3)
    first = cluster.controller()
    assert sum(m.controller.is_active for m in cluster.brokers.values()) == 1
    data, _ = zk_client.get(ControllerZNode.path())
    assert ControllerZNode.decode(data) == first.broker_id
    assert {m.controller_id() for m in cluster.brokers.values()} == {first.broker_id}
    old_epoch = first.controller.epoch
    old_fence = first.controller.epoch_zk_version
    assert ControllerEpochZNode.decode(zk_client.get("/controller_epoch")[0]) == old_epoch

    first.create_topic("t", 1, 3, {})
    wait_until(lambda: zk_state(zk_client, "t", 0), message="partition state")

    cluster.expire(first.broker_id)  # the controller's session dies; the object lives on
    second = wait_until(
        lambda: next(
            (
                m
                for m in cluster.brokers.values()
                if m.controller.is_active and m.controller.epoch > old_epoch
            ),
            None,
        ),
        message="a new controller",
    )
    assert ControllerEpochZNode.decode(zk_client.get("/controller_epoch")[0]) > old_epoch
    cluster.wait_for_brokers({1, 2, 3})  # the first broker is back, with a new session
    assert sum(m.controller.is_active for m in cluster.brokers.values()) == 1
    assert second.controller.is_active and not first.controller.is_active
    # A zombie's write names the right state version; the /controller_epoch version it won
    # with fences it all the same.
    now = zk_state(zk_client, "t", 0)
    assert now is not None
    with pytest.raises(ControllerMovedError):
        write_partition_state(
            cluster.clients[first.broker_id],
            old_fence,
            "t",
            0,
            leader=now.leader,
            leader_epoch=999,
            isr=now.isr,
            controller_epoch=old_epoch,
            expected_version=now.zk_version,
        )
    assert zk_state(zk_client, "t", 0).leader_epoch != 999


def test_stopping_the_controller_hands_over_at_once(cluster: SimCluster) -> None:
    cluster.start(1, 2)
    first = cluster.controller()
    first.stop()  # the kazoo client stays open: stop() must delete /controller itself
    del cluster.brokers[first.broker_id]
    second = cluster.controller()
    assert second is not first and second.controller.epoch == first.controller.epoch + 1


def test_controller_alone_reads_everything_on_election(zk_client: KazooClient) -> None:
    controller = Controller(zk_client, 5)
    controller.start()
    try:
        wait_until(lambda: controller.is_active, message="election")
        assert controller.active_controller_id == 5 and controller.epoch == 1
    finally:
        controller.stop()
    assert zk_client.exists(ControllerZNode.path()) is None


# -- topic creation ----------------------------------------------------------------------------


def test_topic_creation_assigns_and_initialises_partitions(
    cluster: SimCluster, zk_client: KazooClient
) -> None:
    b1, b2, _ = cluster.start(1, 2, 3)
    info = b2.create_topic("events", 6, 3, {"retention.ms": "60000"})
    assert (info.partitions, info.replication_factor) == (6, 3)
    states = wait_until(lambda: all_states(zk_client, "events", 6), message="6 states")
    epoch = cluster.controller().controller.epoch
    leaders = Counter()
    for p, state in states.items():
        replicas = wait_until(lambda p=p: b1.replicas("events", p))
        assert sorted(replicas) == [1, 2, 3]
        assert state.leader == replicas[0] and state.isr == replicas
        assert (state.leader_epoch, state.controller_epoch) == (0, epoch)
        leaders[state.leader] += 1
    assert leaders == {1: 2, 2: 2, 3: 2}
    with pytest.raises(InvalidReplicationFactorError):
        b1.create_topic("too-many", 1, 4, {})
    with pytest.raises(TopicExistsError):
        b1.create_topic("events", 1, 1, {})
    b1.create_topic("a.b", 1, 1, {})
    with pytest.raises(TopicExistsError, match="collides"):
        b1.create_topic("a_b", 1, 1, {})
    assert b1.create_topic("dry", 2, 2, {}, validate_only=True).partitions == 2
    assert zk_client.exists("/brokers/topics/dry") is None


def test_partitions_of_an_unplaceable_topic_wait_for_a_replica(
    cluster: SimCluster, zk_client: KazooClient
) -> None:
    b1, _ = cluster.start(1, 2)
    b1.create_topic("t", 2, 2, {})
    wait_until(lambda: all_states(zk_client, "t", 2), message="states")
    cluster.kill(1)
    cluster.kill(2)
    # Write an assignment on brokers that are all down: no state can be created yet.
    zk_client.create("/brokers/topics/later", TopicZNode.encode({0: [2, 1]}))
    cluster.start(3)
    assert zk_state(zk_client, "later", 0) is None
    cluster.start(2)
    state = wait_until(lambda: zk_state(zk_client, "later", 0), message="state on rejoin")
    assert (state.leader, state.isr, state.leader_epoch) == (2, (2,), 0)


# -- broker loss and return --------------------------------------------------------------------


def test_broker_loss_moves_leadership_and_shrinks_isrs(
    cluster: SimCluster, zk_client: KazooClient
) -> None:
    b1, *_ = cluster.start(1, 2, 3)
    b1.create_topic("t", 6, 3, {})
    before = wait_until(lambda: all_states(zk_client, "t", 6), message="states")
    replicas = {p: b1.replicas("t", p) for p in range(6)}
    cluster.kill(1)

    def moved() -> dict[int, PartitionState] | None:
        states = all_states(zk_client, "t", 6)
        ok = states and all(1 not in s.isr and s.leader != 1 for s in states.values())
        return states if ok else None

    after = wait_until(moved, message="broker 1 out of every ISR")
    for p in range(6):
        old, new = before[p], after[p]
        if old.leader == 1:
            expected = next(r for r in replicas[p] if r != 1)
            assert (new.leader, new.leader_epoch) == (expected, old.leader_epoch + 1)
        else:  # a follower left: same leader, same epoch
            assert (new.leader, new.leader_epoch) == (old.leader, old.leader_epoch)
        assert new.isr == tuple(r for r in old.isr if r != 1)


@pytest.mark.parametrize("unclean", [False, True])
def test_last_isr_member_lost_and_back(
    cluster: SimCluster, zk_client: KazooClient, unclean: bool
) -> None:
    b1, _, _ = cluster.start(1, 2, 3, unclean_leader_election=unclean)
    b1.create_topic("t", 1, 2, {})
    state = wait_until(lambda: zk_state(zk_client, "t", 0), message="state")
    leader, follower = b1.replicas("t", 0)
    cluster.kill(follower)
    wait_until(lambda: zk_state(zk_client, "t", 0).isr == (leader,), message="ISR shrink")
    cluster.kill(leader)
    offline = wait_until(
        lambda: (s := zk_state(zk_client, "t", 0)) and s.leader == NO_LEADER and s,
        message="offline partition",
    )
    assert offline.isr == (leader,) and offline.leader_epoch == state.leader_epoch + 1

    cluster.start(follower, unclean_leader_election=unclean)  # out of sync: not eligible
    if unclean:
        s = wait_until(
            lambda: (s := zk_state(zk_client, "t", 0)) and s.leader == follower and s,
            message="unclean leader",
        )
        assert s.isr == (follower,) and s.leader_epoch == offline.leader_epoch + 1
        return
    b3 = cluster.brokers[follower]
    b3.create_topic("barrier", 1, 1, {})  # the controller handles events in order
    wait_until(lambda: zk_state(zk_client, "barrier", 0), message="barrier")
    assert zk_state(zk_client, "t", 0) == offline

    cluster.start(leader)
    back = wait_until(
        lambda: (s := zk_state(zk_client, "t", 0)) and s.leader == leader and s,
        message="the last ISR member leads again",
    )
    assert back.isr == (leader,) and back.leader_epoch == offline.leader_epoch + 1


def test_bounced_broker_loses_leadership(cluster: SimCluster, zk_client: KazooClient) -> None:
    b1, _ = cluster.start(1, 2)
    b1.create_topic("t", 2, 2, {})
    states = wait_until(lambda: all_states(zk_client, "t", 2), message="states")
    victim = next(m for m in cluster.brokers.values() if not m.controller.is_active).broker_id
    led = [p for p, s in states.items() if s.leader == victim]
    cluster.expire(victim)  # gone and back (the controller may see only the new czxid)
    for p in led:
        wait_until(
            lambda p=p: zk_state(zk_client, "t", p).leader_epoch > states[p].leader_epoch,
            message="a new leader epoch",
        )


# -- failover mid-work -------------------------------------------------------------------------


def test_topic_created_while_the_controller_dies_gets_all_states(
    cluster: SimCluster,
    zk_client: KazooClient,
    zk_connect: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The first controller runs on a broker that holds no replicas (it never registers), so
    # its death changes no partition: every state must come out exactly as created.
    zombie_client = kazoo_client(zk_connect)
    zombie = Controller(zombie_client, 9)
    release = threading.Event()
    try:
        zombie.start()
        wait_until(lambda: zombie.is_active, message="broker 9 controller")
        old_epoch = zombie.epoch
        cluster.start(1, 2, 3)
        done: list[tuple[str, int]] = []
        original = controller_module.create_partition_states

        # New states are created in batches (two here): the zombie hangs after its first.
        def slow(zk: KazooClient, *args: Any, **kwargs: Any) -> Any:
            if zk is zombie_client and len(done) == 2:
                release.wait(20)  # the controller hangs mid-creation (a long GC pause, say)
            created = original(zk, *args, **kwargs)
            if zk is zombie_client:
                done.extend(("t", p) for p in created)
            return created

        monkeypatch.setattr(controller_module, "STATE_CREATE_BATCH", 2)
        monkeypatch.setattr(controller_module, "create_partition_states", slow)
        cluster.brokers[1].create_topic("t", 8, 3, {})
        wait_until(lambda: len(done) == 2, message="two partitions done")
        expire_session(zombie_client, zk_connect)  # its session dies while it hangs
        states = wait_until(lambda: all_states(zk_client, "t", 8), message="all 8 states")
        wait_until(lambda: zombie_client.connected, message="the zombie's new session")
        with caplog.at_level(logging.INFO, logger="sluice.broker.cluster.controller"):
            release.set()  # the zombie wakes up and writes on: fenced, it changes nothing
            wait_until(lambda: "controller 9: fenced" in caplog.text, message="the fence")
        wait_until(lambda: not zombie.is_active, message="the zombie resigns")
        new_epoch = cluster.controller().controller.epoch
        assert new_epoch == old_epoch + 1 and len(done) == 2
        epochs = sorted(s.controller_epoch for s in states.values())
        assert epochs == [old_epoch] * 2 + [new_epoch] * 6
        assert all(s.leader_epoch == 0 and len(s.isr) == 3 for s in states.values())
        assert all_states(zk_client, "t", 8) == states
    finally:
        release.set()
        zombie.stop()
        zombie_client.stop()
        zombie_client.close()


# -- deletion ----------------------------------------------------------------------------------


def test_topic_deletion(cluster: SimCluster, zk_client: KazooClient) -> None:
    b1, b2 = cluster.start(1, 2)
    info = b1.create_topic("doomed", 3, 2, {"cleanup.policy": "delete"})
    wait_until(lambda: all_states(zk_client, "doomed", 3), message="states")
    wait_until(lambda: b2.get("doomed") and b2.partition_state("doomed", 2))
    assert b2.delete_topic("doomed") == info
    wait_until(lambda: zk_client.exists("/brokers/topics/doomed") is None, message="deleted")
    assert zk_client.exists("/config/topics/doomed") is None
    wait_until(lambda: not zk_client.get_children("/admin/delete_topics"), message="request")
    wait_until(lambda: b1.get("doomed") is None and b2.get("doomed") is None)
    assert b2.partition_state("doomed", 0) is None and b2.replicas("doomed", 0) == ()
    with pytest.raises(UnknownTopicError):
        b1.delete_topic("doomed")
    again = b1.create_topic("doomed", 1, 1, {})  # the name is free again, with a new id
    assert again.topic_id != info.topic_id
    state = wait_until(lambda: b2.partition_state("doomed", 0), message="new state")
    assert state.leader_epoch == 0 and wait_until(lambda: b2.get("doomed")) == again
