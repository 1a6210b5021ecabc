"""``ReplicaFetcher``: a follower's pull loop against one leader broker (one per leader).

For each partition it follows from that leader:

1. **Truncate** (once, when it starts following a new leader or epoch): ask the leader where
   this replica's latest epoch ended (OffsetForLeaderEpoch v3) and cut the local log there, so
   an old leader that comes back drops what was never committed (the ISR article's m3) and
   keeps everything that was. With no epoch recorded locally, fall back to the high watermark.
2. **Fetch** (Fetch v11 with ``replica_id`` set) from its log end offset, append the batches
   as they are (offsets and epochs kept: ``Log.append(assign=False)``), and take the
   leader's high watermark (capped at its own log end) as its own.

Fetches go in a fetch session (KIP-227, :class:`FetchSessionHandler`): after the first, full
request, each names only the partitions whose fetch offset (or log start, or epoch) moved —
those this fetcher just appended to — and the leader answers only partitions with something
new (records, a moved high watermark or log start, an error). A session the leader refuses
or a connection error starts over with a full request.

Errors from the leader (not leader, fenced epoch, unknown topic) leave the partition waiting
for the metadata change that moves it; connection errors reconnect with a backoff.
Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from sluice.broker.log.errors import StorageError
from sluice.broker.log.log import Log
from sluice.broker.log.record_batch import HEADER_SIZE, parse_header
from sluice.broker.protocol import ApiKey, ProtocolError
from sluice.broker.protocol.apis import request_type
from sluice.broker.protocol.build import build
from sluice.broker.protocol.errors import Errors
from sluice.broker.protocol.replica_fetch_request import VERSION as FETCH_VERSION
from sluice.broker.protocol.replica_fetch_request import FetchPosition, encode_replica_fetch
from sluice.broker.replication.broker_client import PLAINTEXT, BrokerClient, BrokerConnector
from sluice.broker.replication.epoch_writer import EpochWriter
from sluice.broker.replication.fetch_session_handler import (
    FetchSessionHandler,
    PartitionRequest,
    SessionRequest,
)
from sluice.broker.replication.partition import Partition, Role
from sluice.broker.security.errors import SaslError
from sluice.common.topic_partition import TopicPartition

log = logging.getLogger(__name__)

FETCH_MAX_WAIT_MS = 500
#: Seconds between recomputing every partition's fetch entry (see ``ReplicaFetcher``).
REFRESH_SECONDS = 5.0
PARTITION_MAX_BYTES = 1 << 20
RESPONSE_MAX_BYTES = 16 << 20


class ReplicaFetcher:
    def __init__(
        self,
        broker_id: int,
        leader_id: int,
        host: str,
        port: int,
        connector: BrokerConnector = PLAINTEXT,
        epochs: EpochWriter | None = None,
    ) -> None:
        """``connector``: how to reach the leader (the inter-broker listener's TLS and SASL);
        ``epochs``: where leader epochs are written (the replica manager's)."""
        self.broker_id = broker_id
        self.leader_id = leader_id
        self.client = BrokerClient(
            host, port, f"sluice-replica-fetcher-{broker_id}", connector=connector
        )
        self.partitions: dict[TopicPartition, Partition] = {}
        self._needs_truncation: set[TopicPartition] = set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._own_epochs = epochs is None
        self.session = FetchSessionHandler()
        # What the next fetch asks for each partition ready to fetch (not being truncated),
        # kept current through ``_touched``: the partitions whose entry may have changed
        # (added, removed, truncated, appended to) since it was last computed. Every
        # ``REFRESH_SECONDS`` all are recomputed, for what moves without the fetcher (a log
        # start moved by retention).
        self._wanted: dict[TopicPartition, PartitionRequest] = {}
        self._touched: set[TopicPartition] = set()
        self._refreshed = 0.0
        self.epochs = epochs or EpochWriter()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        self._stopped = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # shutting down
                await self._task
        await self.client.close()
        if self._own_epochs:
            await self.epochs.close()

    def serves(self, host: str, port: int) -> bool:
        """Whether this fetcher is running and connects to ``host:port``."""
        running = self._task is not None and not self._task.done()
        return running and (self.client.host, self.client.port) == (host, port)

    def add(self, partition: Partition) -> None:
        self.partitions[partition.tp] = partition
        self._needs_truncation.add(partition.tp)
        self._touched.add(partition.tp)
        self._wake.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)
        self._needs_truncation.discard(tp)
        self._touched.add(tp)

    async def _run(self) -> None:
        backoff = 0.1
        while not self._stopped:
            if not self.partitions:
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                if self._needs_truncation:
                    await self._truncate(sorted(self._needs_truncation))
                await self._fetch_once()
                backoff = 0.1
            except asyncio.CancelledError:
                raise
            except SaslError as exc:
                # The leader refused this broker's login: say so on every attempt (the
                # message is the leader's answer and the user name, never the password).
                log.warning(
                    "replica fetcher %d→%d: inter-broker authentication failed: %s; "
                    "retrying in %.1fs", self.broker_id, self.leader_id, exc, backoff,
                )  # fmt: skip
                await self.client.close()
                self.session.reset()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
            except Exception as exc:
                # The leader died mid-response (IncompleteReadError is an EOFError, not an
                # OSError), refused the connection, or sent something we cannot use: never
                # let the task end, or every partition later added to this fetcher would sit
                # unfetched and drop out of the ISR.
                expected = (OSError, EOFError, TimeoutError, ProtocolError, StorageError)
                log.log(
                    logging.INFO if isinstance(exc, expected) else logging.ERROR,
                    "replica fetcher %d→%d: %r; retrying in %.1fs",
                    self.broker_id, self.leader_id, exc, backoff,
                    exc_info=not isinstance(exc, expected),
                )  # fmt: skip
                await self.client.close()
                self.session.reset()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    # -- truncation ------------------------------------------------------------------------

    async def _truncate(self, tps: list[TopicPartition]) -> None:
        try:
            await self._truncate_at_leader_epochs(tps)
        finally:
            # What was cut is written before the next fetch appends after the cut, so the
            # epoch file never names an epoch start that now falls in other data.
            await self._flush_epochs(tps)

    async def _flush_epochs(self, tps: list[TopicPartition]) -> None:
        """Write the epoch changes not written yet (truncations) of ``tps``' logs."""
        logs = [p.log for tp in tps if (p := self.partitions.get(tp)) is not None]
        writes = [self.epochs.flush(log) for log in logs if not log.leader_epochs.written]
        if writes:
            await asyncio.gather(*writes)

    async def _truncate_at_leader_epochs(self, tps: list[TopicPartition]) -> None:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp in tps:
            partition = self.partitions.get(tp)
            if partition is None:
                continue
            latest = partition.log.leader_epochs.latest_epoch
            if latest < 0:
                # No epoch history: the high watermark is all we know was committed.
                partition.log.truncate_to(partition.log.high_watermark)
                self._needs_truncation.discard(tp)
                self._touched.add(tp)
                continue
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition": tp.partition,
                    "current_leader_epoch": partition.leader_epoch,
                    "leader_epoch": latest,
                }  # fmt: skip
            )
        if not by_topic:
            return
        body = build(
            request_type(ApiKey.OFFSET_FOR_LEADER_EPOCH, 3),
            {"replica_id": self.broker_id,
             "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]},
        )  # fmt: skip
        response = await self.client.request(body)
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition)
                partition = self.partitions.get(tp)
                if partition is None or p.error_code != Errors.NONE:
                    continue  # retried on the next round (or the metadata moves it)
                local = partition.log
                target = local.log_end_offset
                if p.end_offset >= 0:
                    # If the leader answered for an older epoch than ours, our own end of that
                    # epoch bounds the cut too (KIP-279).
                    _, ours = local.end_offset_for_epoch(p.leader_epoch)
                    target = min(target, p.end_offset, ours if ours >= 0 else target)
                else:
                    target = min(target, local.high_watermark)
                if target < local.log_end_offset:
                    log.info(
                        "%s: truncating from %d to %d (leader %d, epoch %d)",
                        tp, local.log_end_offset, target, self.leader_id, p.leader_epoch,
                    )  # fmt: skip
                    local.truncate_to(target)
                self._needs_truncation.discard(tp)
                self._touched.add(tp)

    # -- fetching --------------------------------------------------------------------------

    def _update_wanted(self) -> set[TopicPartition]:
        """Recompute the entries of the touched partitions (all, every ``REFRESH_SECONDS``);
        returns the partitions whose entry may have changed."""
        now = time.monotonic()
        if now - self._refreshed >= REFRESH_SECONDS:
            self._refreshed = now
            self._touched.update(self.partitions, self._wanted)
        touched, self._touched = self._touched, set()
        for tp in touched:
            p = self.partitions.get(tp)
            if p is None or tp in self._needs_truncation or p.role is not Role.FOLLOWER:
                self._wanted.pop(tp, None)
            else:
                self._wanted[tp] = PartitionRequest(
                    p.log.log_end_offset, p.log.log_start_offset, p.leader_epoch,
                    PARTITION_MAX_BYTES,
                )  # fmt: skip
        return touched

    def _following(self, tp: TopicPartition) -> Partition | None:
        """``tp``'s partition if this fetcher still fetches it (not removed, not waiting for
        truncation: its leadership may have moved while a fetch was out)."""
        p = self.partitions.get(tp)
        if p is None or tp in self._needs_truncation or p.role is not Role.FOLLOWER:
            return None
        return p

    async def _fetch_once(self) -> None:
        changed = self._update_wanted()
        if not self._wanted:
            await asyncio.sleep(0.05)
            return
        request = self.session.build(self._wanted, changed)
        response = await self.client.request_frame(
            lambda cid: _encode_fetch(self.broker_id, self.client.client_id, request, cid),
            ApiKey.FETCH, FETCH_VERSION,
        )  # fmt: skip
        if not self.session.handle_response(response.error_code, response.session_id):
            if response.error_code != Errors.NONE:
                log.info(
                    "replica fetcher %d→%d: fetch session %d refused (%s); starting over",
                    self.broker_id, self.leader_id, request.session_id,
                    Errors(response.error_code).name,
                )  # fmt: skip
            return
        fetched = [
            (TopicPartition(topic.topic, p.partition_index), p)
            for topic in response.responses
            for p in topic.partitions
        ]  # fmt: skip
        # What a response names may move (appends, truncations, log starts): recomputed next.
        self._touched.update(tp for tp, _ in fetched)
        # The epochs the batches start are written, off the event loop, before the batches
        # (LeaderEpochCache): the appends below then find them written and do no I/O.
        writes = [
            self.epochs.assign(follower.log, entries)
            for tp, p in fetched
            if p.error_code == Errors.NONE and p.records
            and (follower := self._following(tp)) is not None
            and (entries := new_epochs(follower.log, p.records))
        ]  # fmt: skip
        if writes:
            await asyncio.gather(*writes)
        moved: list[TopicPartition] = []
        for tp, p in fetched:
            fetched_partition = self._following(tp)
            if fetched_partition is None:  # the leadership moved during the fetch or writes
                continue
            local = fetched_partition.log
            if p.error_code == Errors.OFFSET_OUT_OF_RANGE:
                if local.log_end_offset < p.log_start_offset:
                    # Retention on the leader passed us: start over where it starts.
                    local.truncate_fully_and_start_at(p.log_start_offset)
                else:
                    self._needs_truncation.add(tp)
                continue
            if p.error_code != Errors.NONE:
                continue
            if p.records:
                local.append(p.records, assign=False)
            local.high_watermark = min(p.high_watermark, local.log_end_offset)
            if p.log_start_offset > local.log_start_offset:
                # The leader moved its log start (DeleteRecords, retention): follow it as far
                # as this replica has committed (Kafka's maybeIncrementLogStartOffset).
                local.increment_log_start_offset(min(p.log_start_offset, local.high_watermark))
                moved.append(tp)
        # A log start that moved cut the epochs from the start: written before the next fetch
        # too (Kafka writes it in the background; a crash first only leaves entries before the
        # log start, which the log cuts again as it loads).
        await self._flush_epochs(moved)


def _encode_fetch(
    broker_id: int, client_id: str, request: SessionRequest, correlation_id: int
) -> bytes:
    """Fetch v11 as a follower, the whole frame (``encode_replica_fetch``): the session's
    metadata and the partitions it names, grouped by topic in the order first named."""
    topics: dict[str, list[FetchPosition]] = {}
    for tp, r in request.partitions.items():
        topics.setdefault(tp.topic, []).append(
            FetchPosition(tp.partition, r.current_leader_epoch, r.fetch_offset,
                          r.log_start_offset, r.max_bytes)
        )  # fmt: skip
    forgotten: dict[str, list[int]] = {}
    for tp in request.forgotten:
        forgotten.setdefault(tp.topic, []).append(tp.partition)
    return encode_replica_fetch(
        correlation_id, client_id, replica_id=broker_id, max_wait_ms=FETCH_MAX_WAIT_MS,
        min_bytes=1, max_bytes=RESPONSE_MAX_BYTES, isolation_level=0,
        session_id=request.session_id, session_epoch=request.epoch,
        topics=list(topics.items()), forgotten=list(forgotten.items()), rack_id="",
    )  # fmt: skip


def new_epochs(log: Log, records: bytes | bytearray | memoryview) -> list[tuple[int, int]]:
    """(epoch, base offset) of each batch in ``records`` that starts an epoch newer than
    ``log``'s latest: what appending them will record. Reads the headers only (the append
    validates the batches)."""
    latest = log.leader_epochs.latest_epoch
    found: list[tuple[int, int]] = []
    position = 0
    while len(records) - position >= HEADER_SIZE:
        h = parse_header(records, position)
        if h.partition_leader_epoch > latest:
            latest = h.partition_leader_epoch
            found.append((latest, h.base_offset))
        if h.size <= HEADER_SIZE:  # a bad length: the append refuses the batch
            break
        position += h.size
    return found
