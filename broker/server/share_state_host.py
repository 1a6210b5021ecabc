"""``ShareStateHost``: how share-group state reaches the replicated ``__share_group_state`` topic
from this broker — the :class:`~sluice.broker.share.share_state_log.ShareStateTransport` of the
broker's :class:`~sluice.broker.share.share_state_log.ShareStateLog`, and the replica manager's
role-change callback for that topic and for the share-partitions this broker leads.

The topic is created on first use like ``__consumer_offsets`` (Kafka's
``share.coordinator.state.topic.*`` defaults: 50 partitions, replication min(3, live
brokers), ``min.insync.replicas`` min(2, replication), compacted). A partition's *leader* is
that partition's share coordinator (FindCoordinator key type 2 names it).

**Writes** are the same replicated append as the group coordinator's offsets: where this
broker leads the partition, in process through the replica manager (acks=all, the topic's
``min.insync.replicas``; it completes when the high watermark covers the batch); where another
broker leads it, as a Produce (acks=-1) to that leader over the inter-broker listener, whose
handler makes the same append. Kafka's persister sends WriteShareGroupState (API key 85)
instead; Sluice does not serve API keys 83–87 yet, and Produce carries the same records to the
same append.

**Reads** (a share-partition's state, when this broker starts leading its topic partition)
come from the local replica of the state partition when this broker holds one that is in the
ISR — its log holds every committed record — read to its log end, as Kafka's coordinator
loads a partition; otherwise from the leader with a Fetch (as a consumer: to its high
watermark). On the 3-broker cluster at replication 3 every broker holds every partition, so
reads are local.

Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from sluice.broker.cluster.cluster_view import ClusterView
from sluice.broker.cluster.topic_metadata import MetadataUnavailableError, TopicExistsError
from sluice.broker.config import BrokerConfig
from sluice.broker.log.errors import CorruptRecordError
from sluice.broker.log.log import Log
from sluice.broker.log.record_batch import iter_batches
from sluice.broker.log.records import decode_batch
from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.apis import request_type
from sluice.broker.protocol.build import build
from sluice.broker.protocol.errors import Errors
from sluice.broker.replication.broker_client import PLAINTEXT, BrokerClient, BrokerConnector
from sluice.broker.replication.partition import Role
from sluice.broker.replication.replica_manager import ReplicaManager
from sluice.broker.share.share_coordinator import ShareCoordinator
from sluice.broker.share.share_state_files import (
    ShareStateFileError,
    read_state_files,
    remove_state_files,
)
from sluice.broker.share.share_state_log import (
    TOPIC,
    RawRecord,
    ShareStateLog,
    ShareStateUnavailableError,
)
from sluice.common.topic_partition import TopicPartition

__all__ = ["ShareStateHost", "build_share_coordinator", "read_log", "remote_append", "remote_read"]

log = logging.getLogger(__name__)

#: Kafka's share.coordinator.state.topic.* defaults.
NUM_PARTITIONS = 50
REPLICATION_FACTOR = 3
MIN_INSYNC_REPLICAS = 2
#: How long a write may wait for the in-sync replicas (Kafka's
#: share.coordinator.write.timeout.ms), and a remote read or write for its answer.
WRITE_TIMEOUT_MS = 5_000
_READ_BYTES = 1 << 20
#: How long a read or write waits for a partition of a new topic to get its leader, and how
#: often it looks (the cluster view has no event to wait on for one partition).
READY_TIMEOUT_S = 5.0
READY_POLL_S = 0.05

OffLoop = Callable[..., Awaitable[Any]]


class ShareStateHost:
    """See the module docstring."""

    def __init__(
        self,
        broker_id: int,
        cluster: ClusterView,
        replicas: ReplicaManager,
        off_loop: OffLoop,
        *,
        connector: BrokerConnector = PLAINTEXT,
        num_partitions: int = NUM_PARTITIONS,
    ) -> None:
        self.broker_id = broker_id
        self.cluster = cluster
        self.replicas = replicas
        self.off_loop = off_loop
        #: the broker's share coordinator, set once built (it is built over this)
        self.share: ShareCoordinator | None = None
        self.connector = connector
        self.num_partitions = num_partitions
        self._clients: dict[int, BrokerClient] = {}

    # -- ShareStateTransport -----------------------------------------------------------------

    async def partitions(self) -> int:
        info = self.cluster.get(TOPIC)
        if info is None:
            replication = min(REPLICATION_FACTOR, max(len(self.cluster.brokers()), 1))
            config = {
                "cleanup.policy": "compact",
                "min.insync.replicas": str(min(MIN_INSYNC_REPLICAS, replication)),
            }
            try:
                with contextlib.suppress(TopicExistsError):  # another broker was first
                    await self.off_loop(
                        self.cluster.create_topic, TOPIC, self.num_partitions, replication,
                        config, internal=True,
                    )  # fmt: skip
            except MetadataUnavailableError as exc:
                raise ShareStateUnavailableError(f"creating {TOPIC}: {exc}") from None
            info = self.cluster.get(TOPIC)
            if info is None:
                raise ShareStateUnavailableError(f"expected {TOPIC} to exist, found none yet")
        return info.partitions

    async def append(self, partition: int, batch: bytes) -> None:
        leader = await self._ready(partition)
        leading, _ = self.replicas.leader_or_error(TOPIC, partition)
        if leading is not None:
            result = await self.replicas.append(
                TOPIC, partition, batch, acks=-1, timeout_ms=WRITE_TIMEOUT_MS, coordinator=True
            )
            if result.error != Errors.NONE:
                raise ShareStateUnavailableError(
                    f"{TOPIC}-{partition}: the append failed with {result.error.name}"
                    + (f" ({result.message})" if result.message else "")
                )
            return
        await remote_append(self._client(leader), partition, batch)

    async def read(self, partition: int) -> list[RawRecord]:
        leader = await self._ready(partition)
        local = self.replicas.partitions.get(TopicPartition(TOPIC, partition))
        if local is not None and (
            local.role is Role.LEADER
            or (local.role is Role.FOLLOWER and self.broker_id in local.isr)
        ):
            return read_log(local.log)
        return await remote_read(self._client(leader), partition)

    # -- the replica manager's role changes --------------------------------------------------

    def on_role_change(self, tp: TopicPartition, role: Role, partition_log: Log | None) -> None:
        """Leading a partition of the state topic: replay it into the state log's mirror
        (what ListGroups and the offsets admin calls read). No longer leading a topic
        partition: its share-partitions are dropped here — their in-flight records are the new
        leader's to load from the topic, and a write of them from here would overwrite what
        the new leader writes."""
        share = self.share
        if share is None:
            return
        if tp.topic == TOPIC:
            if role is Role.LEADER and partition_log is not None:
                live = share.store.load_partition(read_log(partition_log))
                log.info("loaded %s (%d share-partition states)", tp, live)
            return
        if role is not Role.LEADER:
            share.drop_partitions(tp.topic, tp.partition)

    async def migrate_state_files(self, log_dir: str) -> None:
        """Move the share-group state files of an earlier Sluice (``share_state_files``) into
        the topic: their states are written (kept where the topic holds a state already) and,
        once committed, the files deleted. A failure is logged and the files are kept for the
        next start."""
        share = self.share
        try:
            found = read_state_files(log_dir)
        except ShareStateFileError as exc:
            log.error("share-group state files not moved: %s", exc)
            return
        if share is None or not found:
            return
        for group, states in found.items():
            held = share.store.load(group)
            share.store.write(group, {k: v for k, v in states.items() if k not in held})
        try:
            await share.flush()
        except ShareStateUnavailableError as exc:
            log.warning("share-group state files kept, not yet in %s: %s", TOPIC, exc)
            return
        remove_state_files(log_dir)
        log.info("moved the share-group state of %d group(s) into %s", len(found), TOPIC)

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()

    # -- helpers ------------------------------------------------------------------------------

    async def _ready(self, partition: int) -> int:
        """The partition's leader, once it has one (and, if it is this broker, once this
        broker acts as its leader): a topic created a moment ago gets its leaders from the
        controller shortly after. At most ``READY_TIMEOUT_S``."""
        await self.partitions()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READY_TIMEOUT_S
        while True:
            state = self.cluster.partition_state(TOPIC, partition)
            if (
                state is not None
                and state.leader >= 0
                and (
                    state.leader != self.broker_id
                    or self.replicas.leader_partition(TOPIC, partition) is not None
                )
            ):
                return state.leader
            if loop.time() >= deadline:
                raise ShareStateUnavailableError(
                    f"{TOPIC}-{partition}: expected a leader within {READY_TIMEOUT_S:.0f} s, "
                    f"found {'none' if state is None else state.leader}"
                )
            await asyncio.sleep(READY_POLL_S)

    def _client(self, broker_id: int) -> BrokerClient:
        broker = self.cluster.brokers().get(broker_id)
        if broker is None:
            raise ShareStateUnavailableError(f"broker {broker_id} is not registered")
        client = self._clients.get(broker_id)
        if client is None or (client.host, client.port) != (broker.host, broker.port):
            client = BrokerClient(
                broker.host, broker.port, f"sluice-share-state-{self.broker_id}",
                timeout=WRITE_TIMEOUT_MS / 1000 + 1, connector=self.connector,
            )  # fmt: skip
            self._clients[broker_id] = client
        return client


async def remote_append(client: BrokerClient, partition: int, batch: bytes) -> None:
    """Append ``batch`` to ``partition`` of the state topic on its leader, ``client``'s broker:
    a Produce with acks=-1, which the leader answers once the batch is committed. Raises
    ``ShareStateUnavailableError`` for an error answer or an unreachable broker."""
    body = build(request_type(ApiKey.PRODUCE, 8), {
        "transactional_id": None, "acks": -1, "timeout": WRITE_TIMEOUT_MS,
        "topic_data": [{"name": TOPIC, "partition_data": [
            {"index": partition, "records": batch}]}],
    })  # fmt: skip
    response = await _call(client, body, partition)
    (answer,) = [p for t in response.responses for p in t.partition_responses]
    if answer.error_code != Errors.NONE:
        raise ShareStateUnavailableError(
            f"{TOPIC}-{partition}: broker {client.host}:{client.port} answered error code "
            f"{int(answer.error_code)} to the state's Produce"
        )


async def remote_read(client: BrokerClient, partition: int) -> list[RawRecord]:
    """Every record of ``partition`` of the state topic from its leader, ``client``'s broker,
    to its high watermark (Fetch v11 as a consumer, one round per ``_READ_BYTES``). Raises
    ``ShareStateUnavailableError`` for an error answer or an unreachable broker."""
    out: list[RawRecord] = []
    offset = 0
    while True:
        body = build(request_type(ApiKey.FETCH, 11), {
            "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": _READ_BYTES,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": TOPIC, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "log_start_offset": -1, "partition_max_bytes": _READ_BYTES}]}],
        })  # fmt: skip
        response = await _call(client, body, partition)
        (answer,) = [p for t in response.responses for p in t.partitions]
        if answer.error_code == Errors.OFFSET_OUT_OF_RANGE and offset < answer.log_start_offset:
            offset = answer.log_start_offset
            continue
        if answer.error_code != Errors.NONE:
            raise ShareStateUnavailableError(
                f"{TOPIC}-{partition}: broker {client.host}:{client.port} answered error code "
                f"{int(answer.error_code)} to the state's Fetch"
            )
        data = bytes(answer.records or b"")
        if not data:
            return out
        offset = _records(data, out, offset)
        if offset >= answer.high_watermark:
            return out


async def _call(client: BrokerClient, body: Any, partition: int) -> Any:
    try:
        return await client.request(body)
    except (OSError, EOFError, TimeoutError, ConnectionError) as exc:
        raise ShareStateUnavailableError(
            f"{TOPIC}-{partition}: broker {client.host}:{client.port} unreachable: {exc!r}"
        ) from None


def build_share_coordinator(
    config: BrokerConfig, cluster: ClusterView, replicas: ReplicaManager, off_loop: OffLoop
) -> tuple[ShareStateHost, ShareCoordinator]:
    """The broker's share coordinator at its ``group.share.*`` settings, over a
    ``ShareStateLog`` whose transport is the returned host."""
    host = ShareStateHost(
        config.broker_id, cluster, replicas, off_loop, connector=replicas.connector
    )
    settings = config.share_groups
    share = ShareCoordinator(
        ShareStateLog(
            host, lambda: {name: info.topic_id for name, info in cluster.topics().items()}
        ),
        lock_ms=settings.record_lock_duration_ms,
        delivery_limit=settings.delivery_count_limit,
        max_record_locks=settings.partition_max_record_locks,
        heartbeat_interval_ms=settings.heartbeat_interval_ms,
        session_timeout_ms=settings.session_timeout_ms,
        max_sessions=settings.max_share_sessions,
    )
    host.share = share
    return host, share


def read_log(partition_log: Log) -> list[RawRecord]:
    """Every record of a local log of the state topic, to its end, in order."""
    out: list[RawRecord] = []
    offset = partition_log.log_start_offset
    while offset < partition_log.log_end_offset:
        result = partition_log.read(offset, _READ_BYTES, upper_bound="log_end")
        if result.slice is None:
            break
        next_offset = _records(result.slice.read(), out, offset)
        if next_offset <= offset:
            break
        offset = next_offset
    return out


def _records(data: bytes, out: list[RawRecord], offset: int) -> int:
    """Append the keyed records of the whole batches in ``data`` at or after ``offset``;
    the offset after the last batch."""
    try:
        for header in iter_batches(data[: _whole(data)]):
            if header.next_offset <= offset:
                continue
            if not header.is_control:
                for record in decode_batch(data, header.position):
                    if record.offset >= offset and record.key is not None:
                        out.append((bytes(record.key), _bytes(record.value)))
            offset = header.next_offset
    except CorruptRecordError as exc:
        raise ShareStateUnavailableError(f"{TOPIC}: a batch cannot be read: {exc}") from None
    return offset


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def _whole(data: bytes) -> int:
    """The length of the whole batches at the start of ``data`` (a read may cut the last)."""
    pos = 0
    while pos + 12 <= len(data):
        size = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
        if size <= 0 or pos + 12 + size > len(data):
            break
        pos += 12 + size
    return pos
