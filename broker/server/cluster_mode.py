"""The one place standalone and cluster mode differ: which cluster view a broker gets.

Standalone, a broker has no ZooKeeper client and a
:class:`~sluice.broker.cluster.single_broker.SingleBrokerCluster` over its first log dir (topics
in a local metadata store; this broker the only replica and leader of everything). In cluster
mode it has a kazoo client and a :class:`~sluice.broker.cluster.cluster_metadata.ClusterMetadata`
over ZooKeeper, where topics, leaders and ISRs live (registered once the listener is bound, so
the advertised port is known). Building either touches no network: the client is started by
``Broker.startup``. Pure construction; thread-safe.
"""

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.retry import KazooRetry

from sluice.broker.cluster.cluster_metadata import ClusterMetadata
from sluice.broker.cluster.cluster_view import ClusterView
from sluice.broker.cluster.local_metadata import LocalMetadataStore
from sluice.broker.cluster.single_broker import SingleBrokerCluster
from sluice.broker.config import BrokerConfig

__all__ = ["ZOOKEEPER_RETRY_MAX_DELAY", "cluster_view_for"]

# kazoo's own reconnect backoff grows to an hour; a broker retries ZooKeeper at least every
# ZOOKEEPER_RETRY_MAX_DELAY seconds (so it reconnects soon after an outage, and kazoo's stop,
# which waits for the reconnect loop to notice it, returns soon).
ZOOKEEPER_RETRY_MAX_DELAY = 1.0


def cluster_view_for(config: BrokerConfig) -> tuple[KazooClient | None, ClusterView]:
    """The ZooKeeper client (None standalone) and the cluster view ``config`` asks for."""
    advertised_port = config.advertised.port or config.listener.port  # set again once bound
    if config.standalone:
        store = LocalMetadataStore(config.log_dirs[0], config.broker_id)
        single = SingleBrokerCluster(
            store, config.broker_id, listener_host=config.advertised.host,
            listener_port=advertised_port,
        )  # fmt: skip
        return None, single
    zk = KazooClient(
        hosts=config.zookeeper_connect,
        timeout=config.zookeeper_session_timeout_ms / 1000,
        connection_retry=KazooRetry(max_tries=-1, max_delay=ZOOKEEPER_RETRY_MAX_DELAY),
    )
    return zk, ClusterMetadata(
        zk,
        config.broker_id,
        listener_host=config.advertised.host,
        listener_port=advertised_port,
        inter_broker_listener=config.listener.name,
        default_replication_factor=config.default_replication_factor,
        num_partitions=config.num_partitions,
        unclean_leader_election=config.unclean_leader_election,
        # Restarted right after a crash, the broker finds its previous session's
        # registration still there until that session expires: wait that long.
        registration_timeout=max(10.0, config.zookeeper_session_timeout_ms / 1000 + 5),
    )
