"""The state topic's remote path against real brokers of the 3-broker cluster: a batch of
share-state records appended with a Produce (acks=-1) to a partition's leader reads back with a
Fetch from it, record for record; the same Produce to a broker that does not lead the
partition, or to no broker at all, is a ``ShareStateUnavailableError`` naming the answer."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.broker.log.records import encode_batch
from sluice.broker.replication.broker_client import BrokerClient
from sluice.broker.server.share_state_host import remote_append, remote_read
from sluice.broker.share.share_state_log import TOPIC, ShareStateUnavailableError
from sluice.broker.share.share_state_records import (
    SNAPSHOT,
    UPDATE,
    ShareState,
    ShareStateKey,
    StateBatch,
    encode_key,
    encode_snapshot,
    encode_update,
)
from sluice.testing.cluster import BrokerCluster

pytestmark = [pytest.mark.broker]

KEY = ShareStateKey("sg-remote", uuid.UUID(int=3), 0)


@pytest.fixture
def cluster(tmp_path: Path, zk_connect: str) -> Iterator[BrokerCluster]:
    with BrokerCluster(tmp_path, zk_connect) as c:
        yield c


def append(port: int, batch: bytes) -> None:
    async def run() -> None:
        client = BrokerClient("127.0.0.1", port, "test-share-state", timeout=10)
        try:
            await remote_append(client, 0, batch)
        finally:
            await client.close()

    asyncio.run(run())


def read(port: int) -> list[tuple[bytes, bytes | None]]:
    async def run() -> list[tuple[bytes, bytes | None]]:
        client = BrokerClient("127.0.0.1", port, "test-share-state", timeout=10)
        try:
            return await remote_read(client, 0)
        finally:
            await client.close()

    return asyncio.run(run())


def test_append_and_read_through_the_leader(cluster: BrokerCluster) -> None:
    cluster.create_topic(TOPIC, 1)
    leader = cluster.wait_leader(TOPIC, 0).leader
    other = next(b for b in cluster.running() if b != leader)
    snapshot = (
        encode_key(SNAPSHOT, KEY),
        encode_snapshot(ShareState(4, (StateBatch(4, 6, 2, 1),))),
    )
    update = (encode_key(UPDATE, KEY), encode_update(0, 1, 7, ()))
    tombstone = (encode_key(UPDATE, KEY), None)
    for records in ([snapshot], [update, tombstone]):
        append(cluster.brokers[leader].port, encode_batch(records, timestamps=[0] * len(records)))
    assert read(cluster.brokers[leader].port) == [snapshot, update, tombstone]
    with pytest.raises(
        ShareStateUnavailableError, match="answered error code 6 to the state's Produce"
    ):
        append(cluster.brokers[other].port, encode_batch([snapshot], timestamps=[0]))
    with pytest.raises(
        ShareStateUnavailableError, match="answered error code 6 to the state's Fetch"
    ):
        read(cluster.brokers[other].port)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    with pytest.raises(ShareStateUnavailableError, match="unreachable"):
        read(closed)
