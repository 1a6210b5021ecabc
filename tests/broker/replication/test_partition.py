"""The leader's HW and ISR rules (Partition), with a fake clock and a real Log."""

from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.records import encode_batch
from sluice.broker.replication.partition import Partition, Role
from sluice.common.topic_partition import TopicPartition


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def leader(tmp_path, replicas=(1, 2, 3), isr=(1, 2, 3)):
    clock = Clock()
    log = Log(tmp_path / "t-0", LogConfig())
    p = Partition(TopicPartition("t", 0), log, broker_id=1, clock=clock)
    p.become_leader(5, replicas, isr, zk_version=0)
    return p, clock


def test_hw_is_the_smallest_leo_in_the_isr(tmp_path):
    p, _ = leader(tmp_path)
    for _ in range(3):
        p.log.append(encode_batch([(b"k", b"v")] * 2), leader_epoch=p.leader_epoch)
    assert p.log.log_end_offset == 6 and p.log.high_watermark == 0
    assert p.record_follower_fetch(2, 6) is False  # follower 3 has nothing yet
    assert p.record_follower_fetch(3, 4) is True
    assert p.log.high_watermark == 4
    assert not p.committed(5) and p.committed(4)
    p.record_follower_fetch(3, 6)
    assert p.log.high_watermark == 6
    assert p.log.leader_epochs.entries == [(5, 0)]


def test_a_lagging_follower_leaves_and_returns_when_caught_up(tmp_path):
    p, clock = leader(tmp_path)
    p.log.append(encode_batch([(b"k", b"v")]), leader_epoch=5)
    clock.now = 1000
    p.record_follower_fetch(2, 1)  # caught up
    p.record_follower_fetch(3, 0)  # behind
    clock.now = 40_000
    p.record_follower_fetch(2, 1)
    assert p.isr_to_shrink(30_000) == (1, 2)
    p.update_state((1, 2), zk_version=1)
    assert p.log.high_watermark == 1  # without 3, everything is committed
    assert p.isr_to_expand(2) is None  # already in
    assert p.isr_to_expand(3) is None  # its last fetch was behind
    p.record_follower_fetch(3, 1)
    assert p.isr_to_expand(3) == (1, 2, 3)


def test_a_follower_records_nothing(tmp_path):
    p, _ = leader(tmp_path)
    assert p.become_follower(2, 6, (1, 2, 3), (2, 3), 4) is True
    assert p.role is Role.FOLLOWER and p.followers == {}
    assert p.record_follower_fetch(3, 10) is False
    assert p.become_follower(2, 6, (1, 2, 3), (2, 3), 5) is False  # same leadership


def test_a_dead_follower_never_rejoins_on_another_followers_fetch(tmp_path):
    # The kill -9: follower 3 caught up, then died. Nothing is written after, so its
    # last LEO stays equal to the HW; the expiry pass drops it, and follower 2 keeps fetching.
    p, clock = leader(tmp_path)
    p.log.append(encode_batch([(b"k", b"v")] * 4), leader_epoch=5)
    p.record_follower_fetch(2, 4)
    p.record_follower_fetch(3, 4)
    assert p.log.high_watermark == 4 and p.isr_to_expand(3) is None  # in the ISR already
    for step in range(1, 80):
        clock.now = step * 500.0
        p.record_follower_fetch(2, 4)
        assert p.isr_to_expand(2) is None  # only the fetcher may join, and 2 is in
        shrunk = p.isr_to_shrink(3_000)
        if shrunk is not None:
            p.update_state(shrunk, p.zk_version + 1)
    assert p.isr == (1, 2)
    # Back from the dead: its own fetch at the HW lets it join.
    p.record_follower_fetch(3, 4)
    assert p.isr_to_expand(3) == (1, 2, 3)


def test_a_follower_joins_only_from_the_hw_and_the_epoch_start(tmp_path):
    p, _ = leader(tmp_path, isr=(1, 2))
    p.log.append(encode_batch([(b"k", b"v")] * 4), leader_epoch=5)
    p.record_follower_fetch(2, 4)
    assert p.log.high_watermark == 4
    p.record_follower_fetch(3, 3)
    assert p.isr_to_expand(3) is None  # below the HW
    # A new epoch starting at 4: the follower must reach it, not only the HW.
    p.become_leader(6, (1, 2, 3), (1, 2), zk_version=1)
    p.log.append(encode_batch([(b"k", b"v")] * 2), leader_epoch=6)
    assert p.epoch_start_offset == 4
    p.record_follower_fetch(3, 4)
    assert p.isr_to_expand(3) == (1, 2, 3)
    assert p.isr_to_expand(4) is None  # not a replica
