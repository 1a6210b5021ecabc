"""New replicas' logs created off the event loop (``LogCreator``): a change from another thread
(the cluster's metadata worker in cluster mode) gets its logs made on the creator's thread, the
partitions exist only once their logs do, and a log whose replica went away meanwhile is
deleted. A change made on the loop itself still creates the log at once."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from sluice.broker.cluster.local_metadata import LocalMetadataStore
from sluice.broker.cluster.single_broker import SingleBrokerCluster
from sluice.broker.log.log import Log
from sluice.broker.log.log_manager import LogManager
from sluice.broker.log.records import encode_batch
from sluice.broker.protocol.errors import Errors
from sluice.broker.replication.partition import Role
from sluice.broker.replication.replica_manager import ReplicaManager
from sluice.common.topic_partition import TopicPartition

BROKER = 7
WAIT_S = 10.0


class GatedLogs:
    """The log manager's ``get_or_create_log``, noting the thread of each call; calls from
    the creator's thread wait for ``gate`` (so a test can act while creation is under way)."""

    def __init__(self, manager: LogManager) -> None:
        self.manager = manager
        self.threads: list[str] = []
        self.started = threading.Event()
        self.gate = threading.Event()

    def __call__(self, topic: str, partition: int) -> Log:
        name = threading.current_thread().name
        self.threads.append(name)
        if name.startswith("replica-log-creator"):
            self.started.set()
            assert self.gate.wait(WAIT_S), f"expected the gate open within {WAIT_S} s"
        return self.manager.get_or_create_log(topic, partition)


def setup(tmp_path: Path) -> tuple[SingleBrokerCluster, LogManager, GatedLogs]:
    store = LocalMetadataStore(tmp_path / "logs", BROKER)
    cluster = SingleBrokerCluster(store, BROKER, listener_host="h", listener_port=9)
    manager = LogManager([tmp_path / "logs"])
    manager.startup()
    return cluster, manager, GatedLogs(manager)


def test_a_change_from_another_thread_gets_its_logs_off_the_loop(tmp_path: Path) -> None:
    cluster, manager, logs = setup(tmp_path)
    led: set[TopicPartition] = set()
    all_led = asyncio.Event()  # (bound to the loop that first waits on it)

    def on_role(tp: TopicPartition, role: Role, _log: Log | None) -> None:
        if role is Role.LEADER:
            led.add(tp)
            if len(led) == 20:
                all_led.set()

    replicas = ReplicaManager(BROKER, cluster, logs, manager.delete_log, on_role_change=on_role)

    async def scenario() -> None:
        replicas.start()
        # The listener runs on this worker thread, as the metadata worker's would.
        await asyncio.to_thread(cluster.create_topic, "burst", 20, 1, {})
        assert await asyncio.to_thread(logs.started.wait, WAIT_S), "no log creation started"
        # Its logs are being made: no partition of it exists here yet.
        assert not [tp for tp in replicas.partitions if tp.topic == "burst"]
        _, error = replicas.leader_or_error("burst", 0)
        assert error is Errors.NOT_LEADER_OR_FOLLOWER, error
        logs.gate.set()
        async with asyncio.timeout(WAIT_S):
            await all_led.wait()
        result = await replicas.append(
            "burst", 3, encode_batch([(b"k", b"v")]), acks=-1, timeout_ms=1000
        )
        assert result.error is Errors.NONE, result
        await replicas.stop()

    asyncio.run(scenario())
    creators = [name for name in logs.threads if name.startswith("replica-log-creator")]
    assert len(creators) == 20, logs.threads
    loop_calls = [name for name in logs.threads if name == "MainThread"]
    assert not loop_calls, f"expected no log made on the loop's thread, found {len(loop_calls)}"
    assert len(manager.logs()) == 20
    manager.shutdown()


def test_a_replica_removed_while_its_log_is_made_has_the_log_deleted(tmp_path: Path) -> None:
    cluster, manager, logs = setup(tmp_path)
    deleted = asyncio.Event()

    def delete_log(topic: str, partition: int) -> None:
        manager.delete_log(topic, partition)
        if not manager.logs():
            deleted.set()

    replicas = ReplicaManager(BROKER, cluster, logs, delete_log)

    async def scenario() -> None:
        replicas.start()
        await asyncio.to_thread(cluster.create_topic, "gone", 2, 1, {})
        assert await asyncio.to_thread(logs.started.wait, WAIT_S), "no log creation started"
        # Deleted while its first log is being made (the creator waits at the gate).
        await asyncio.to_thread(cluster.delete_topic, "gone")
        logs.gate.set()
        async with asyncio.timeout(WAIT_S):
            await deleted.wait()
        assert not replicas.partitions
        await replicas.stop()

    asyncio.run(scenario())
    assert manager.logs() == {}
    assert not [p for p in (tmp_path / "logs").iterdir() if p.name.startswith("gone-")]
    manager.shutdown()


def test_a_change_on_the_loop_creates_the_log_at_once(tmp_path: Path) -> None:
    cluster, manager, logs = setup(tmp_path)
    replicas = ReplicaManager(BROKER, cluster, logs, manager.delete_log)

    async def scenario() -> None:
        replicas.start()
        cluster.create_topic("here", 2, 1, {})  # on the loop: applied before it returns
        leading, error = replicas.leader_or_error("here", 1)
        assert error is Errors.NONE and leading is not None, error
        await replicas.stop()

    asyncio.run(scenario())
    assert logs.threads == ["MainThread", "MainThread"], logs.threads
    manager.shutdown()
