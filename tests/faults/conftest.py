"""Fixtures of the fault tests: a ``NetworkLab`` (a bridge and network namespaces), a ZooKeeper
on its service address, and a three-broker ``LabCluster`` whose brokers each run in their own
namespace.

Without network namespaces (not root, no iproute2, a kernel without ``htb``/``u32``/
``blackhole``) the tests skip — except under ``CI=true``, where that is a failure naming the
reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.testing.ci import in_ci
from sluice.testing.faults import FaultLog
from sluice.testing.netns import LabCluster, LabZooKeeper, NetworkLab, netns_missing
from sluice.testing.zookeeper import new_chroot, zookeeper_missing

# min.insync.replicas=2: an acks=all write needs a follower, so a leader cut off alone cannot
# acknowledge anything by itself.
FAULT_OVERRIDES = {"min.insync.replicas": "2"}
SESSION_TIMEOUT_S = 4.0  # sluice.testing.cluster.CLUSTER_OVERRIDES


def _require(missing: str | None, what: str) -> None:
    if missing is None:
        return
    message = f"{what} is needed but {missing}"
    if in_ci():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture
def lab() -> Iterator[NetworkLab]:
    _require(netns_missing(), "a network namespace lab")
    with NetworkLab() as network:
        yield network


@pytest.fixture
def lab_zookeeper(lab: NetworkLab, tmp_path: Path) -> Iterator[LabZooKeeper]:
    _require(zookeeper_missing(), "ZooKeeper")
    server = LabZooKeeper(lab, tmp_path / "zookeeper").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def lab_cluster(
    lab: NetworkLab, lab_zookeeper: LabZooKeeper, tmp_path: Path
) -> Iterator[LabCluster]:
    connect = lab_zookeeper.connect_string + new_chroot(lab_zookeeper)
    cluster = LabCluster(lab, tmp_path, connect, overrides=FAULT_OVERRIDES)
    with cluster:
        yield cluster


@pytest.fixture
def fault_log(lab_cluster: LabCluster) -> Iterator[FaultLog]:
    """Faults injected by the test; whatever is still injected is healed at the end (before
    the cluster stops: a paused broker gets SIGCONT first)."""
    log = FaultLog()
    try:
        yield log
    finally:
        log.heal_all()
