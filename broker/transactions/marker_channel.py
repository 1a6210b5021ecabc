"""``TransactionMarkerChannel``: delivers a transaction's markers to the leaders of its
partitions (Kafka's ``TransactionMarkerChannelManager``).

One :meth:`~TransactionMarkerChannel.write` ends one transaction everywhere it wrote:

1. Each partition is routed to its leader as the broker's metadata shows it now
   (:class:`MarkerRoutes`). The partitions this broker leads are written in-process
   (``write_local``); the others are grouped per leader into one ``WriteTxnMarkers`` v1
   request each, sent concurrently over one :class:`BrokerClient` per broker.
2. The leader appends the marker and answers once the ISR has it (acks=all; see
   ``sluice.broker.server.transaction_host.write_marker``).
3. A retriable answer — NOT_LEADER_OR_FOLLOWER (the leader moved), LEADER_NOT_AVAILABLE (an
   election is under way), a timeout, too small an ISR, a lost connection — puts the partition
   back in the queue: after a backoff (``backoff_ms``, doubled up to ``max_backoff_ms``) it is
   routed again from the metadata of that moment, until ``retry_for_ms`` has passed.
4. Final answers are returned: NONE, UNKNOWN_TOPIC_OR_PARTITION (the topic was deleted: there
   is nothing left to end; Kafka's rule too), or an error that retrying cannot fix. The
   partitions still failing at the deadline come back with their last error; the coordinator
   keeps the transaction prepared and retries (``TransactionCoordinator``).

Markers are idempotent at the leader for the purpose of the transaction: a second COMMIT of
the same producer epoch closes nothing new, and one of an older epoch is refused by the
log's producer state (the handler answers NONE: a later transaction already ended it there).
So resending after a lost answer is safe, which is what makes the retries above sound.

Thread safety: the broker's event loop only. A client serves one request at a time (its own
lock), so concurrent transactions' markers to one broker queue behind each other.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.apis import request_type
from sluice.broker.protocol.build import build
from sluice.broker.protocol.errors import Errors, for_code
from sluice.broker.replication.broker_client import PLAINTEXT, BrokerClient, BrokerConnector
from sluice.broker.security.errors import SaslError

log = logging.getLogger(__name__)

TopicPartitionKey = tuple[str, int]

#: Answers after which the same marker is sent again (to the leader of that moment).
RETRIABLE = frozenset({
    Errors.NOT_LEADER_OR_FOLLOWER, Errors.LEADER_NOT_AVAILABLE, Errors.REQUEST_TIMED_OUT,
    Errors.NOT_ENOUGH_REPLICAS, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    Errors.BROKER_NOT_AVAILABLE, Errors.KAFKA_STORAGE_ERROR, Errors.COORDINATOR_LOAD_IN_PROGRESS,
    Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR, Errors.UNKNOWN_SERVER_ERROR,
})  # fmt: skip
#: Answers that end a partition's delivery successfully.
DONE = frozenset({Errors.NONE, Errors.UNKNOWN_TOPIC_OR_PARTITION})


@dataclass(frozen=True)
class TxnMarker:
    """What every partition of one transaction receives."""

    producer_id: int
    producer_epoch: int
    commit: bool
    #: The leader epoch of the transaction's ``__transaction_state`` partition at its
    #: coordinator: written into the marker, so a later coordinator's markers are told apart.
    coordinator_epoch: int


class MarkerRoutes(Protocol):
    """Where markers go: what the channel needs of its broker."""

    @property
    def broker_id(self) -> int: ...

    def leader(self, topic: str, partition: int) -> int | Errors:
        """The partition's leader, or UNKNOWN_TOPIC_OR_PARTITION / LEADER_NOT_AVAILABLE."""
        ...

    def address(self, broker_id: int) -> tuple[str, int] | None:
        """(host, port) of a live broker; None if it is not registered."""
        ...

    async def write_local(
        self, marker: TxnMarker, partitions: Sequence[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, Errors]:
        """Write the marker to partitions this broker leads, as the WriteTxnMarkers handler."""
        ...


class TransactionMarkerChannel:
    """See the module docstring."""

    def __init__(
        self, routes: MarkerRoutes, *, request_timeout_ms: int = 15_000,
        retry_for_ms: int = 15_000, backoff_ms: int = 50, max_backoff_ms: int = 1_000,
        connector: BrokerConnector = PLAINTEXT,
    ) -> None:  # fmt: skip
        """``connector``: how to reach the other brokers (the inter-broker listener's TLS
        and SASL)."""
        self.routes = routes
        self.connector = connector
        self.request_timeout_ms = request_timeout_ms
        self.retry_for_ms = retry_for_ms
        self.backoff_ms = backoff_ms
        self.max_backoff_ms = max_backoff_ms
        self._clients: dict[int, BrokerClient] = {}

    async def write(
        self, marker: TxnMarker, partitions: Iterable[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, Errors]:
        """Deliver ``marker`` to every partition; the final answer of each (see the module
        docstring)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.retry_for_ms / 1000
        backoff = self.backoff_ms / 1000
        results: dict[TopicPartitionKey, Errors] = {}
        queue = sorted(set(partitions))
        while True:
            by_leader: dict[int, list[TopicPartitionKey]] = {}
            for tp in queue:
                leader = self.routes.leader(*tp)
                if isinstance(leader, Errors):
                    results[tp] = leader
                else:
                    by_leader.setdefault(leader, []).append(tp)
            answers = await asyncio.gather(
                *(self._send(broker, marker, tps) for broker, tps in sorted(by_leader.items()))
            )
            for answer in answers:
                results.update(answer)
            queue = [tp for tp in queue if results[tp] in RETRIABLE]
            if not queue or loop.time() + backoff > deadline:
                return results
            log.debug("markers of producer %d: retrying %s", marker.producer_id, queue)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.max_backoff_ms / 1000)

    async def _send(
        self, broker: int, marker: TxnMarker, partitions: Sequence[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, Errors]:
        if broker == self.routes.broker_id:
            return await self.routes.write_local(marker, partitions)
        unreachable = dict.fromkeys(partitions, Errors.BROKER_NOT_AVAILABLE)
        client = await self._client(broker)
        if client is None:
            return unreachable
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        body = build(
            request_type(ApiKey.WRITE_TXN_MARKERS, 1),
            {"markers": [{
                "producer_id": marker.producer_id, "producer_epoch": marker.producer_epoch,
                "transaction_result": marker.commit,
                "coordinator_epoch": marker.coordinator_epoch,
                "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
            }]},
        )  # fmt: skip
        try:
            response = await client.request(body)
        except (OSError, EOFError, TimeoutError, ConnectionError) as exc:
            log.info("WriteTxnMarkers to broker %d failed: %r", broker, exc)
            return unreachable
        except SaslError as exc:  # the leader refused the login; no secret in the message
            log.warning("WriteTxnMarkers to broker %d: authentication failed: %s", broker, exc)
            return unreachable
        results: dict[TopicPartitionKey, Errors] = {}
        for answered in response.markers:
            for t in answered.topics:
                for p in t.partitions:
                    results[(t.name, p.partition_index)] = for_code(p.error_code)
        # A partition missing from the answer was not handled: send it again.
        return {tp: results.get(tp, Errors.UNKNOWN_SERVER_ERROR) for tp in partitions}

    async def _client(self, broker: int) -> BrokerClient | None:
        address = self.routes.address(broker)
        if address is None:
            return None
        client = self._clients.get(broker)
        if client is None or (client.host, client.port) != address:
            if client is not None:  # the broker came back on another address
                await client.close()
            client = BrokerClient(
                address[0], address[1], f"sluice-txn-markers-{self.routes.broker_id}",
                timeout=self.request_timeout_ms / 1000, connector=self.connector,
            )  # fmt: skip
            self._clients[broker] = client
        return client

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()
