"""Three (or more) real broker processes on one ZooKeeper chroot: ``BrokerCluster`` lives in
``sluice.testing.cluster`` (see there); imported here for the test modules that still name
this module (``wait_for`` is ``sluice.testing.cluster.wait_for_metadata``)."""

from __future__ import annotations

from sluice.testing.cluster import QUIET, BrokerCluster
from sluice.testing.cluster import wait_for_metadata as wait_for

__all__ = ["QUIET", "BrokerCluster", "wait_for"]
