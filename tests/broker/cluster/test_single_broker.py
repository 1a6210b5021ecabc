"""Standalone mode as a cluster of one: the SingleBrokerCluster view, and the replica manager
running over it unchanged (replication factor 1, no fetchers, appends committed at once)."""

from __future__ import annotations

import asyncio

import pytest

from sluice.broker.cluster.local_metadata import LocalMetadataStore
from sluice.broker.cluster.single_broker import SingleBrokerCluster
from sluice.broker.cluster.topic_metadata import InvalidReplicationFactorError, UnknownTopicError
from sluice.broker.log.log_manager import LogManager
from sluice.broker.log.records import encode_batch
from sluice.broker.protocol.errors import Errors
from sluice.broker.replication.replica_manager import ReplicaManager


def view(tmp_path, broker_id=7):
    store = LocalMetadataStore(tmp_path / "logs", broker_id)
    return SingleBrokerCluster(store, broker_id, listener_host="h", listener_port=9)


def test_the_broker_is_the_whole_cluster(tmp_path):
    cluster = view(tmp_path)
    cluster.create_topic("t", 2, 1, {"retention.ms": "1000"})
    assert cluster.controller_id() == 7
    assert [(b.broker_id, b.host, b.port, b.rack) for b in cluster.brokers().values()] == [
        (7, "h", 9, None)
    ]
    assert cluster.replicas("t", 1) == (7,)
    state = cluster.partition_state("t", 1)
    assert state is not None and (state.leader, state.leader_epoch, state.isr) == (7, 0, (7,))
    # Partitions outside the topic, and unknown topics, have no replicas and no state.
    assert cluster.replicas("t", 2) == () and cluster.partition_state("t", 2) is None
    assert cluster.partition_state("nope", 0) is None
    assert cluster.get("t").config == {"retention.ms": "1000"}
    assert cluster.cluster_id == LocalMetadataStore(tmp_path / "logs", 7).cluster_id


def test_refuses_what_one_broker_cannot_hold(tmp_path):
    cluster = view(tmp_path)
    with pytest.raises(InvalidReplicationFactorError, match="expected replication factor 1"):
        cluster.create_topic("t", 1, 2, {})
    with pytest.raises(UnknownTopicError):
        cluster.delete_topic("t")
    with pytest.raises(ValueError, match=r"expected the ISR of a single broker, \(7,\)"):
        cluster.update_isr("t", 0, 0, [7, 8], 0)


def test_listeners_hear_of_changes_at_once_and_validation_changes_nothing(tmp_path):
    cluster = view(tmp_path)
    heard = []
    cluster.add_listener(heard.append)
    cluster.create_topic("v", 3, 1, {}, validate_only=True)
    assert heard == [] and cluster.get("v") is None
    cluster.create_topic("t", 2, 1, {})
    cluster.delete_topic("t")
    assert heard == [{("t", 0), ("t", 1)}, {("t", 0), ("t", 1)}]


def test_a_failing_listener_removes_the_topic_again(tmp_path):
    cluster = view(tmp_path)
    calls = []

    def listener(changed):
        calls.append(changed)
        if len(calls) == 1:
            raise OSError(28, "No space left on device")

    cluster.add_listener(listener)
    with pytest.raises(OSError, match="No space"):
        cluster.create_topic("t", 2, 1, {})
    assert cluster.get("t") is None
    assert calls == [{("t", 0), ("t", 1)}, {("t", 0), ("t", 1)}]  # told of the removal too


def test_the_replica_manager_leads_every_partition_of_a_single_broker(tmp_path):
    cluster = view(tmp_path)
    cluster.create_topic("t", 2, 1, {})
    manager = LogManager([tmp_path / "logs"])
    manager.startup()
    deleted = []

    def delete_log(topic, partition):
        deleted.append((topic, partition))
        manager.delete_log(topic, partition)

    replicas = ReplicaManager(7, cluster, manager.get_or_create_log, delete_log)

    async def scenario():
        replicas.start()
        leading, error = replicas.leader_or_error("t", 1)
        assert error is Errors.NONE and leading is not None and leading.leader_epoch == 0
        assert replicas.leader_or_error("t", 2) == (None, Errors.UNKNOWN_TOPIC_OR_PARTITION)
        assert replicas.leader_or_error("u", 0) == (None, Errors.UNKNOWN_TOPIC_OR_PARTITION)
        # acks=-1 commits at once: the ISR is this broker alone.
        result = await replicas.append("t", 1, encode_batch([(b"k", b"v")] * 3), acks=-1,
                                       timeout_ms=1)  # fmt: skip
        assert result.error is Errors.NONE and result.info is not None
        assert leading.log.high_watermark == leading.log.log_end_offset == 3
        # A topic created on the loop has its replicas when create_topic returns.
        cluster.create_topic("new", 1, 1, {})
        assert replicas.leader_or_error("new", 0)[1] is Errors.NONE
        cluster.delete_topic("new")
        assert replicas.leader_or_error("new", 0)[1] is Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert deleted == [("new", 0)] and manager.get_log("new", 0) is None
        assert replicas.fetchers == {}
        await replicas.stop()

    asyncio.run(scenario())
    manager.shutdown()
