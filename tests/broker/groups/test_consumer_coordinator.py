"""The KIP-848 consumer group coordinator: epochs, fencing, static members, reconciliation.

The reconciliation is checked against a model of clients (Hypothesis): each client owns what
its last heartbeat response assigned it and reports it on the next heartbeat, as a KIP-848
consumer does; whatever the interleaving of joins, leaves, session expiries, subscription
changes, partition additions and lost responses, no partition is owned by two clients at any
point, and once everybody heartbeats again the group settles with every subscribed partition
owned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.broker.groups.consumer_coordinator import ConsumerGroupCoordinator, HeartbeatResult
from sluice.broker.groups.coordinator import GroupCoordinator
from sluice.broker.groups.group_coordinator_config import ConsumerGroupConfig
from sluice.broker.protocol.errors import Errors

TOPICS = {"t": 6}
Owned = dict[str, frozenset[int]]


class Clock(ConsumerGroupCoordinator):
    """The coordinator on a clock the test moves."""

    now = 1000.0

    def _now(self) -> float:
        return self.now


def join(c: ConsumerGroupCoordinator, member: str, topics: dict[str, int] = TOPICS,
         **kw: Any) -> HeartbeatResult:  # fmt: skip
    kw.setdefault("subscribed_names", ["t"])
    return c.heartbeat("g", member, 0, topics=topics, rebalance_timeout_ms=30_000, **kw)


def beat(c: ConsumerGroupCoordinator, member: str, epoch: int, owned: Owned | None,
         topics: dict[str, int] = TOPICS) -> HeartbeatResult:  # fmt: skip
    return c.heartbeat("g", member, epoch, topics=topics, owned=owned)


def test_first_member_gets_everything_at_epoch_1() -> None:
    c = ConsumerGroupCoordinator()
    r = join(c, "m1")
    assert (r.error, r.member_id, r.member_epoch) == (Errors.NONE, "m1", 1)
    assert r.assignment == {"t": frozenset(range(6))}
    group = c.describe("g")
    assert group is not None and group.state() == "Stable"


def test_a_partition_moves_only_after_its_owner_revoked_it() -> None:
    c = ConsumerGroupCoordinator()
    a = join(c, "m1")
    b = join(c, "m2")  # epoch 2: the target splits 3/3, but m1 still owns everything
    assert b.member_epoch == 2 and b.assignment == {}
    group = c.describe("g")
    assert group is not None and group.state() == "Reconciling"
    # m1 is told to give up three partitions; its epoch stays until it has.
    r1 = beat(c, "m1", 1, a.assignment)
    assert r1.member_epoch == 1 and r1.assignment is not None and len(r1.assignment["t"]) == 3
    revoked = frozenset(range(6)) - r1.assignment["t"]
    # m2 asks before m1 acknowledged: still nothing.
    assert beat(c, "m2", 2, {}).assignment is None
    # m1 acknowledges (owns only what it kept): epoch 2; then m2 gets the revoked ones.
    assert beat(c, "m1", 1, r1.assignment).member_epoch == 2
    r2 = beat(c, "m2", 2, {})
    assert r2.assignment == {"t": revoked}
    assert group.state() == "Stable"


def test_fencing_and_unknown_members() -> None:
    c = ConsumerGroupCoordinator()
    join(c, "m1")
    assert beat(c, "m1", 5, None).error is Errors.FENCED_MEMBER_EPOCH
    assert beat(c, "zz", 1, None).error is Errors.UNKNOWN_MEMBER_ID
    join(c, "m2")
    # m1 at epoch 1 while the group moved on: its previous epoch is accepted once, with owned
    # partitions within its assignment; an epoch below that is fenced.
    r = beat(c, "m1", 1, {"t": frozenset({0})})
    assert r.error is Errors.NONE and r.member_epoch == 2 and r.assignment is not None
    # Its response lost, m1 heartbeats with epoch 1 again: accepted while it owns no more
    # than its assignment, fenced when it claims more.
    assert beat(c, "m1", 1, r.assignment).error is Errors.NONE
    assert beat(c, "m1", 1, {"t": frozenset(range(6))}).error is Errors.FENCED_MEMBER_EPOCH
    assert c.heartbeat("", "m1", 0, topics=TOPICS).error is Errors.INVALID_REQUEST
    assert join(c, "m3", server_assignor="sticky").error is Errors.UNSUPPORTED_ASSIGNOR
    assert join(c, "m3", subscribed_names=None, subscribed_regex="(").error is (
        Errors.INVALID_REGULAR_EXPRESSION
    )


def test_a_full_request_gets_the_assignment_back() -> None:
    # Kafka's isFullRequest: after an error a client sends everything (rebalance timeout,
    # subscription, owned partitions) and is answered its assignment even when unchanged.
    c = ConsumerGroupCoordinator()
    r = join(c, "m1")
    assert r.assignment is not None
    assert beat(c, "m1", r.member_epoch, r.assignment).assignment is None  # unchanged
    full = c.heartbeat("g", "m1", r.member_epoch, topics=TOPICS, owned=r.assignment,
                       rebalance_timeout_ms=30_000, subscribed_names=["t"])  # fmt: skip
    assert full.assignment == r.assignment


def test_leave_frees_partitions() -> None:
    c = ConsumerGroupCoordinator()
    join(c, "m1")
    join(c, "m2")
    assert beat(c, "m1", -1, None).member_epoch == -1
    r = beat(c, "m2", 2, {})
    assert r.assignment == {"t": frozenset(range(6))} and r.member_epoch == 3


def test_unsubscribe_and_resubscribe_as_librdkafka_does_in_0045_many_updates() -> None:
    # The heartbeats librdkafka v2.14.2 sent in a failing run of its test 0045
    # subscribe_many_updates, in order, with Kafka 4's answers. After the leave librdkafka sent
    # nothing more: the rejoin flag its unsubscribe's revoke-all set was overwritten by the
    # (empty) assign it queues after the revocation answered in step 3, so it never applied
    # its new subscription. The last step is the join it sends in the runs that pass.
    c = ConsumerGroupCoordinator()
    topics = {f"t{i}": 4 for i in range(95, 100)}
    every = {t: frozenset(range(4)) for t in topics}
    r = join(c, "m", topics, subscribed_names=sorted(topics))
    epoch = r.member_epoch
    assert r.assignment == every
    assert beat(c, "m", epoch, every, topics).assignment is None
    # A new subscription without t95, owned partitions not reported (null): the member keeps
    # its epoch and is told its assignment without t95 (Kafka's UNREVOKED_PARTITIONS).
    r = c.heartbeat("g", "m", epoch, topics=topics, subscribed_names=sorted(topics)[1:])
    kept = {t: ps for t, ps in every.items() if t != "t95"}
    assert (r.error, r.member_epoch, r.assignment) == (Errors.NONE, epoch, kept)
    r = beat(c, "m", epoch, None, topics)  # still unreported: nothing new
    assert (r.error, r.member_epoch, r.assignment) == (Errors.NONE, epoch, None)
    r = beat(c, "m", -1, None, topics)  # the unsubscribe's leave
    assert (r.error, r.member_epoch) == (Errors.NONE, -1)
    group = c.describe("g")
    assert group is not None and group.members == {} and group.owners == {}
    r = join(c, "m", topics, subscribed_names=["t99"], owned={})
    assert (r.error, r.assignment) == (Errors.NONE, {"t99": frozenset(range(4))})
    assert r.member_epoch > epoch


def test_static_member_comes_back_without_a_rebalance() -> None:
    c = ConsumerGroupCoordinator()
    r = join(c, "m1", instance_id="i1")
    group = c.describe("g")
    assert group is not None
    epoch = group.group_epoch
    assert c.heartbeat("g", "m1", -2, topics=TOPICS, instance_id="i1").member_epoch == -2
    assert join(c, "m9", instance_id="i1").error is Errors.NONE
    assert group.group_epoch == epoch and "m9" in group.members and "m1" not in group.members
    assert group.members["m9"].assigned == r.assignment
    # While m9 holds i1, another process with i1 is refused.
    assert join(c, "m8", instance_id="i1").error is Errors.UNRELEASED_INSTANCE_ID


def test_sessions_expire() -> None:
    c = Clock()  # group.consumer.session.timeout.ms: Kafka's 45 s
    join(c, "m1")
    join(c, "m2")
    c.now += 30
    beat(c, "m2", 2, {})
    c.now += 20
    assert c.expire_sessions() == [("g", "m1")]
    assert beat(c, "m2", 2, {}).assignment == {"t": frozenset(range(6))}


def test_the_group_consumer_keys_are_what_the_coordinator_applies() -> None:
    config = ConsumerGroupConfig.from_properties({
        "group.consumer.session.timeout.ms": "50000",
        "group.consumer.heartbeat.interval.ms": "7000",
        "group.consumer.max.size": "2",
        "group.consumer.assignors":
            "range,org.apache.kafka.coordinator.group.assignor.UniformAssignor",
    })  # fmt: skip
    c = Clock(config)
    assert c.heartbeat_interval_ms == 7000  # what every heartbeat response carries
    join(c, "m1")
    c.now += 46  # past Kafka's default 45 s, within the configured 50 s
    assert c.expire_sessions() == []
    join(c, "m2")
    assert join(c, "m3").error is Errors.GROUP_MAX_SIZE_REACHED
    group = c.describe("g")
    assert group is not None and group.assignor == "range"  # the first is the default
    assert join(c, "m1", server_assignor="uniform").error is Errors.NONE
    assert group.assignor == "uniform"
    assert join(c, "m4", server_assignor="sticky").error is Errors.UNSUPPORTED_ASSIGNOR
    c.now += 51  # both last heard from 51 s ago
    assert sorted(m for _g, m in c.expire_sessions()) == ["m1", "m2"]


def test_regex_subscription_follows_new_topics() -> None:
    c = ConsumerGroupCoordinator()
    topics = {"orders-1": 2, "other": 2}
    r = join(c, "m1", subscribed_names=None, subscribed_regex="orders-.*", topics=topics)
    assert r.assignment == {}  # a regex new to the group is resolved from the next heartbeat
    r = beat(c, "m1", r.member_epoch, r.assignment, topics=topics)
    assert r.assignment == {"orders-1": frozenset({0, 1})}
    r = beat(c, "m1", r.member_epoch, r.assignment, topics={"orders-1": 2, "orders-2": 1})
    assert r.assignment == {"orders-1": frozenset({0, 1}), "orders-2": frozenset({0})}


def test_a_new_regex_is_resolved_after_the_heartbeat_that_brings_it() -> None:
    # Kafka resolves a new regex in the background: the heartbeat that brings it is answered
    # with the named topics; the regex's come with a later one. A regex the group has already
    # resolved (another member's) applies at once; one nobody uses any more is forgotten.
    topics = {"orders-1": 2, "audit": 1}
    c = ConsumerGroupCoordinator()
    r = join(c, "m1", subscribed_names=["audit"], subscribed_regex="(^orders-.)", topics=topics)
    assert r.assignment == {"audit": frozenset({0})}
    r = beat(c, "m1", r.member_epoch, r.assignment, topics=topics)
    assert r.assignment == {"audit": frozenset({0}), "orders-1": frozenset({0, 1})}
    r2 = join(c, "m2", subscribed_names=[], subscribed_regex="(^orders-.)", topics=topics)
    group = c.describe("g")
    assert group is not None and group.target["m2"] != {}  # known: in m2's first target
    assert beat(c, "m1", r.member_epoch, r.assignment, topics=topics).error is Errors.NONE
    assert beat(c, "m2", r2.member_epoch, {}, topics=topics).error is Errors.NONE
    assert beat(c, "m1", -1, None, topics=topics).error is Errors.NONE
    assert beat(c, "m2", -1, None, topics=topics).error is Errors.NONE
    r = join(c, "m3", subscribed_names=[], subscribed_regex="(^orders-.)", topics=topics)
    assert r.assignment == {}  # the group forgot it: resolved again, from the next heartbeat


def test_names_and_a_regex_together_as_librdkafka_sends_them() -> None:
    # librdkafka's subscribe(["^orders-.", "audit"]): the names without the regexes, and the
    # regexes combined into one (kept with their "^"); a regex-only subscription sends an empty
    # list of names, a names-only one an empty regex. Kafka 4 takes both fields as given.
    c = ConsumerGroupCoordinator()
    r = join(c, "m1", subscribed_names=[], subscribed_regex="(^orders-.)", topics={"other": 1})
    assert (r.error, r.assignment) == (Errors.NONE, {})  # nothing matches yet
    topics = {"other": 1, "orders-1": 2}
    r = beat(c, "m1", r.member_epoch, r.assignment, topics=topics)  # the topic appeared
    assert r.assignment == {"orders-1": frozenset({0, 1})}
    r = c.heartbeat("g", "m1", r.member_epoch, topics=topics, owned=r.assignment,
                    subscribed_names=["other"], subscribed_regex="(^orders-.)")  # fmt: skip
    assert r.assignment == {"orders-1": frozenset({0, 1}), "other": frozenset({0})}
    r = c.heartbeat("g", "m1", r.member_epoch, topics=topics, owned=r.assignment,
                    subscribed_names=["other"], subscribed_regex="")  # fmt: skip
    group = c.describe("g")
    assert group is not None and group.members["m1"].subscribed_regex is None
    assert r.assignment == {"other": frozenset({0})}  # orders-1 revoked
    # A join naming neither field is refused; one with an empty list is a member of nothing.
    assert join(c, "m2", subscribed_names=None).error is Errors.INVALID_REQUEST
    assert join(c, "m2", subscribed_names=[]).error is Errors.NONE


def test_a_classic_group_with_members_is_not_a_consumer_group() -> None:
    classic = GroupCoordinator()
    c = ConsumerGroupCoordinator(classic=classic)
    from sluice.broker.groups.group import Group, Member

    group = classic.groups["g"] = Group("g")
    group.members["x"] = Member("x", None, "c", "h", 10_000, 10_000, "consumer", [])
    assert join(c, "m1").error is Errors.GROUP_ID_NOT_FOUND
    group.members.clear()
    assert join(c, "m1").error is Errors.NONE  # an empty classic group converts
    assert "g" not in classic.groups


# ---- the model ------------------------------------------------------------------------------


@dataclass
class Client:
    member_id: str
    epoch: int = 0
    owned: Owned = field(default_factory=dict)


def _answer(client: Client, r: HeartbeatResult) -> None:
    if r.error in (Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID):
        client.owned, client.epoch = {}, 0  # the client gives everything up and rejoins
        return
    assert r.error is Errors.NONE, r
    client.epoch = r.member_epoch
    if r.assignment is not None:
        client.owned = dict(r.assignment)


def _check_disjoint(clients: dict[str, Client]) -> None:
    seen: dict[tuple[str, int], str] = {}
    for c in clients.values():
        for t, ps in c.owned.items():
            for p in ps:
                assert (t, p) not in seen, f"{(t, p)} owned by {seen[(t, p)]} and {c.member_id}"
                seen[(t, p)] = c.member_id


actions = st.lists(
    st.tuples(st.sampled_from(["join", "beat", "beat", "beat", "leave", "expire", "grow",
                               "subscribe", "lose"]), st.integers(0, 5)),
    max_size=60,
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(actions, st.sampled_from(["uniform", "range"]))
def test_no_partition_is_ever_owned_by_two_clients(
    steps: list[tuple[str, int]], assignor: str
) -> None:
    c = Clock(ConsumerGroupConfig(assignors=(assignor,)))
    topics = {"t": 4, "u": 2}
    clients: dict[str, Client] = {}
    subscriptions: dict[str, list[str]] = {}
    for action, n in steps:
        name = f"m{n}"
        client = clients.get(name)
        if action == "join" and client is None:
            client = clients[name] = Client(name)
            subscriptions[name] = ["t", "u"] if n % 2 else ["t"]
        if client is None:
            continue
        if action == "leave":
            c.heartbeat("g", name, -1, topics=topics)
            del clients[name]
            continue
        if action == "expire":  # the process died: its session runs out
            member = c.groups["g"].members.get(name)
            if member is not None:
                member.session_deadline = -1.0
            c.expire_sessions()
            del clients[name]
            continue
        if action == "grow":
            topics["u"] += 1
        names = None
        if action == "subscribe" or client.epoch == 0:
            if action == "subscribe":
                subscriptions[name] = ["u"] if subscriptions[name] != ["u"] else ["t"]
            names = subscriptions[name]
        r = c.heartbeat("g", name, client.epoch, topics=topics, subscribed_names=names,
                        rebalance_timeout_ms=30_000 if client.epoch == 0 else -1,
                        owned=client.owned)  # fmt: skip
        if action == "lose" and r.error is Errors.NONE and client.epoch != 0:
            continue  # the response is lost: the client goes on with its epoch and partitions
        _answer(client, r)
        _check_disjoint(clients)
    # Everybody heartbeats until the group settles: every subscribed partition owned.
    for _ in range(4 * len(clients) + 4):
        for client in clients.values():
            names = subscriptions[client.member_id] if client.epoch == 0 else None
            r = c.heartbeat("g", client.member_id, client.epoch, topics=topics, owned=client.owned,
                            subscribed_names=names, rebalance_timeout_ms=30_000)  # fmt: skip
            _answer(client, r)
            _check_disjoint(clients)
    if clients:
        group = c.groups["g"]
        assert group.state() == "Stable"
        wanted = {(t, p) for t, n in topics.items() for p in range(n)
                  if any(t in subscriptions[m] for m in clients)}  # fmt: skip
        owned = {(t, p) for cl in clients.values() for t, ps in cl.owned.items() for p in ps}
        assert owned == wanted
