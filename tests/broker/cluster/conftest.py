"""Fixtures shared by the cluster tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.broker.cluster import SimCluster


@pytest.fixture
def cluster(zk_connect: str) -> Iterator[SimCluster]:
    """Several simulated brokers (ClusterMetadata instances) on one ZooKeeper chroot.
    test_cluster_brokers.py overrides it with real broker processes."""
    sim = SimCluster(zk_connect)
    try:
        yield sim
    finally:
        sim.close()
