"""A real, standalone ZooKeeper for tests: ``sluice.testing.zookeeper`` (see there); imported
here for the test modules that still name this module."""

from __future__ import annotations

from sluice.testing.zookeeper import ZooKeeperServer, zookeeper_missing

__all__ = ["ZooKeeperServer", "zookeeper_missing"]
