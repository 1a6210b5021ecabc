"""Kafka's documented ``acks=1`` loss, narrowed: a leader cut off from ZooKeeper and its
followers (the test client still reaches it) stops taking produce requests as soon as kazoo
reports the connection suspended — not when the session expires and another leader is elected.
An ``acks=1`` producer runs throughout; whatever it had acknowledged and the log no longer
holds must have been acknowledged before the cut-off broker logged the suspension."""

from __future__ import annotations

import re
import time
from datetime import datetime
from pathlib import Path

import pytest

from bench.soak_check import lost_acks, read_back
from bench.soak_workload import AckedProducer
from sluice.broker.protocol.errors import Errors
from sluice.testing.cluster import wait_for_metadata
from sluice.testing.faults import Cut, FaultLog, direct_produce, leader_of
from sluice.testing.net import wait_until
from sluice.testing.netns import LabCluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TOPIC = "acks1"
PARTITIONS = 3
RATE = 300
# An acknowledgement reaches the client a little after the broker appended the batch: a write
# appended just before the suspension may be acknowledged just after the line was logged.
ACK_SLACK_S = 1.0
_SUSPENDED = re.compile(r"^ts=(\S+) .*ZooKeeper connection suspended", re.MULTILINE)


def suspended_at(output: Path, after: float) -> float | None:
    """The wall time of the first suspension the broker logged at or after ``after``."""
    for match in _SUSPENDED.finditer(output.read_text(encoding="utf-8", errors="replace")):
        at = datetime.fromisoformat(match.group(1)).timestamp()
        if at >= after:
            return at
    return None


def test_acks1_loss_is_bounded_by_the_disconnect(
    lab_cluster: LabCluster, fault_log: FaultLog
) -> None:
    lab_cluster.create_topic(TOPIC, PARTITIONS)
    wall0, start = time.time(), time.monotonic()
    producer = AckedProducer(
        lab_cluster.bootstrap, TOPIC, PARTITIONS, start=start, rate=RATE, acks="1"
    ).start()
    try:
        wait_for_metadata(lambda: len(producer.acks) >= RATE, 60, "first acks")
        old = leader_of(lab_cluster, TOPIC, 0)
        deposed = lab_cluster.lab_broker(old)
        cut_wall = time.time()
        cut = fault_log.inject(Cut("partition", f"broker {old}", cluster=lab_cluster,
                                   broker_id=old))  # fmt: skip
        seen = wait_until(
            lambda: suspended_at(deposed.output_path, cut_wall - 0.5), 20,
            f"broker {old} to notice the disconnect",
        )  # fmt: skip
        # The fence: still reachable by the client, the cut-off leader refuses acks=1 writes.
        refused = direct_produce(deposed, TOPIC, 0, b"to the cut-off leader", acks=1)
        assert refused == Errors.NOT_LEADER_OR_FOLLOWER, refused
        others = [i for i in lab_cluster.brokers if i != old]
        lab_cluster.wait_views(others, TOPIC, 0, lambda v: v.leader in others, 30, "new leader")
        target = len(producer.acks) + RATE
        wait_for_metadata(lambda: len(producer.acks) >= target, 60, "acks via the new leader")
        fault_log.heal(cut)
        everyone = set(lab_cluster.brokers)
        for p in range(PARTITIONS):
            lab_cluster.wait_views(everyone, TOPIC, p, lambda v: set(v.isr) == everyone, 60,
                                   "full ISR after the heal")  # fmt: skip
        target = len(producer.acks) + RATE
        wait_for_metadata(lambda: len(producer.acks) >= target, 60, "acks after the heal")
    finally:
        producer.stop()
    lost = lost_acks(producer.acks, read_back(lab_cluster.bootstrap, TOPIC, PARTITIONS))
    late = [a for a in lost if wall0 + a.at > seen + ACK_SLACK_S]
    detect = seen - cut_wall
    print(f"acks=1: {len(producer.acks)} acked, {len(lost)} lost; the disconnect was noticed "
          f"{detect:.1f} s after the cut")  # fmt: skip
    assert not late, (
        f"expected every lost acks=1 message acknowledged before broker {old} noticed the "
        f"disconnect ({detect:.1f} s after the cut), found {len(late)} acknowledged later: "
        f"{[(a.partition, a.seq, round(wall0 + a.at - seen, 2)) for a in late[:5]]}"
    )
