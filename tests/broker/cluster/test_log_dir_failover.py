"""A cluster broker's log dir fills up (a small tmpfs as its ``log.dirs``) under an ``acks=all``
idempotent producer: the broker answers KAFKA_STORAGE_ERROR for its replicas there, reports
them offline to the controller, the controller moves their leadership to an in-sync replica
elsewhere and drops them from the ISRs, and the producer keeps going through the new leaders.
When space is back the dir comes online again (no restart) and the replicas rejoin the ISRs.
Everything acknowledged is read back exactly once, in order.

Mounting a tmpfs needs root (CAP_SYS_ADMIN): without it the test skips — except under
``CI=true``, where that is a failure."""

from __future__ import annotations

import errno
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.soak_check import check, read_back
from bench.soak_workload import AckedProducer
from sluice.broker.protocol.errors import Errors
from sluice.testing.ci import in_ci
from sluice.testing.cluster import BrokerCluster, wait_for_metadata
from sluice.testing.faults import direct_produce

pytestmark = [pytest.mark.slow, pytest.mark.broker, pytest.mark.timeout(240)]

TOPIC = "events"
PARTITIONS = 3
RATE = 300
VICTIM = 1
DISK_BYTES = 24 << 20
RETRY_MS = 1000  # log.dir.failure.retry.ms: how often the offline dir is probed


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[BrokerCluster]:
    c = BrokerCluster(
        tmp_path,
        zk_connect,
        overrides={"min.insync.replicas": "2", "log.dir.failure.retry.ms": str(RETRY_MS)},
    )
    disk = c.brokers[VICTIM].log_dir
    disk.mkdir(parents=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(disk)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        reason = f"cannot mount a tmpfs (root needed): {done.stderr.strip()}"
        if in_ci():
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        with c:
            yield c
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(directory: Path) -> Path:
    """Write a file into ``directory`` until the filesystem is full; returns it."""
    filler = directory / "filler"
    chunk = b"\\0" * (256 << 10)
    with filler.open("wb") as f:
        try:
            for _ in range(4 * DISK_BYTES // len(chunk)):  # bounded: the disk is far smaller
                f.write(chunk)
                f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
            return filler
    raise AssertionError(f"expected {directory} to fill up, it took {4 * DISK_BYTES} bytes")


def test_full_log_dir_moves_leadership_away(cluster: BrokerCluster) -> None:
    cluster.create_topic(TOPIC, PARTITIONS, 3)
    led = [p for p in range(PARTITIONS) if cluster.partition(TOPIC, p).leader == VICTIM]
    assert led, "expected the victim to lead a partition (replicas are assigned round robin)"
    producer = AckedProducer(cluster.bootstrap, TOPIC, PARTITIONS, start=time.monotonic(),
                             rate=RATE).start()  # fmt: skip
    try:
        wait_for_metadata(lambda: len(producer.acks) >= RATE, 60, "first acks")
        filler = fill(cluster.brokers[VICTIM].log_dir)
        for p in range(PARTITIONS):  # every replica on the full dir leaves its ISR
            cluster.wait_partition(
                TOPIC, p, lambda v: v.leader != VICTIM and VICTIM not in v.isrs, 30,
                f"broker {VICTIM}'s replica offline",
            )  # fmt: skip
        refused = direct_produce(cluster.brokers[VICTIM], TOPIC, led[0], b"to the full dir")
        assert refused in (Errors.KAFKA_STORAGE_ERROR, Errors.NOT_LEADER_OR_FOLLOWER), refused
        target = len(producer.acks) + 2 * RATE
        wait_for_metadata(lambda: len(producer.acks) >= target, 60, "acks via the new leaders")
        filler.unlink()  # space is back: the dir is probed, comes back, and the replicas rejoin
        for p in range(PARTITIONS):
            cluster.wait_isr(TOPIC, p, {0, 1, 2}, timeout=60)
        target = len(producer.acks) + RATE
        wait_for_metadata(lambda: len(producer.acks) >= target, 60, "acks after recovery")
    finally:
        producer.stop()
    result = check(producer.acks, read_back(cluster.bootstrap, TOPIC, PARTITIONS))
    assert result.acked > 0 and result.ok, result.as_dict()
    assert not producer.fatal_errors
