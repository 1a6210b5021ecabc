"""Helpers for the cluster tests: simulated brokers sharing one real ZooKeeper.

A :class:`SimCluster` runs several :class:`ClusterMetadata` instances in this process, each
with its own kazoo client (its own session), so "a broker dies" is "its session ends":

* :meth:`SimCluster.kill` stops the client: the session closes and the broker's ephemeral
  znodes vanish at once (a crash, as the rest of the cluster sees it);
* :meth:`SimCluster.expire` expires the session from outside
  (:func:`sluice.testing.zookeeper.expire_session`): the instance lives on as a zombie, then
  kazoo reconnects with a fresh session and the instance re-registers.
"""

from __future__ import annotations

from typing import Any

from kazoo.client import KazooClient

from sluice.broker.cluster.cluster_metadata import ClusterMetadata
from sluice.testing.net import wait_until
from sluice.testing.zookeeper import expire_session, kazoo_client

# Test modules import these from here; they live in sluice.testing.
__all__ = ["SimCluster"]


class SimCluster:
    """Brokers as :class:`ClusterMetadata` instances, one kazoo client each; see module doc."""

    def __init__(self, connect: str, session_timeout: float = 10.0) -> None:
        self.connect = connect
        self.session_timeout = session_timeout  # kazoo's session timeout, for every client
        self.brokers: dict[int, ClusterMetadata] = {}
        self.clients: dict[int, KazooClient] = {}
        self._all: list[tuple[ClusterMetadata, KazooClient]] = []

    def add(self, broker_id: int, **kwargs: Any) -> ClusterMetadata:
        client = kazoo_client(self.connect, self.session_timeout)
        kwargs.setdefault("listener_host", "127.0.0.1")
        kwargs.setdefault("listener_port", 9000 + broker_id)
        metadata = ClusterMetadata(client, broker_id, **kwargs)
        self._all.append((metadata, client))
        metadata.start()
        self.brokers[broker_id] = metadata
        self.clients[broker_id] = client
        return metadata

    def start(self, *broker_ids: int, **kwargs: Any) -> list[ClusterMetadata]:
        started = [self.add(b, **kwargs) for b in broker_ids]
        self.wait_for_brokers(set(self.brokers))
        return started

    def wait_for_brokers(self, expected: set[int], timeout: float = 10.0) -> None:
        """Every running instance sees exactly ``expected`` live and agrees on a controller."""

        def settled() -> bool:
            views = list(self.brokers.values())
            return all(set(m.brokers()) == expected for m in views) and (
                len({m.controller_id() for m in views} - {-1}) == 1
                and all(m.controller_id() != -1 for m in views)
            )

        wait_until(settled, timeout, f"brokers {sorted(expected)} and one controller")

    def kill(self, broker_id: int) -> None:
        """Crash a broker: close its session, then stop what is left of it."""
        metadata = self.brokers.pop(broker_id)
        client = self.clients.pop(broker_id)
        client.stop()
        metadata.stop()

    def expire(self, broker_id: int) -> None:
        expire_session(self.clients[broker_id], self.connect)

    def controller(self) -> ClusterMetadata:
        """The running instance whose controller is active."""
        return wait_until(
            lambda: next((m for m in self.brokers.values() if m.controller.is_active), None),
            message="an active controller",
        )

    def close(self) -> None:
        for metadata, client in self._all:
            metadata.stop()
            client.stop()
            client.close()
