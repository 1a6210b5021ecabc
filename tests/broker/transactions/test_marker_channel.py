"""``TransactionMarkerChannel`` against a fake remote broker speaking the real codec: markers
grouped per leader, local ones written in-process, retriable answers re-routed to the leader
of the moment, final answers returned, an unreachable broker retried until the deadline."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Sequence

from sluice.broker.protocol import decode_request
from sluice.broker.protocol.errors import Errors
from sluice.broker.server.responses import respond
from sluice.broker.transactions.marker_channel import TransactionMarkerChannel, TxnMarker

MARKER = TxnMarker(producer_id=42, producer_epoch=3, commit=True, coordinator_epoch=7)


class FakeBroker:
    """Answers WriteTxnMarkers with ``answers[(topic, partition)]`` (NONE by default)."""

    def __init__(self) -> None:
        self.answers: dict[tuple[str, int], list[Errors]] = {}
        self.received: list[tuple[tuple[str, int], TxnMarker]] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> tuple[str, int]:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return "127.0.0.1", self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                request = decode_request(await reader.readexactly(size))
                markers = []
                for m in request.body.markers:
                    marker = TxnMarker(m.producer_id, m.producer_epoch, m.transaction_result,
                                       m.coordinator_epoch)  # fmt: skip
                    topics = []
                    for t in m.topics:
                        partitions = []
                        for p in t.partition_indexes:
                            self.received.append(((t.name, p), marker))
                            queue = self.answers.get((t.name, p), [])
                            code = queue.pop(0) if queue else Errors.NONE
                            partitions.append({"partition_index": p, "error_code": code})
                        topics.append({"name": t.name, "partitions": partitions})
                    markers.append({"producer_id": m.producer_id, "topics": topics})
                writer.write(respond(request, {"markers": markers}))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


class Routes:
    broker_id = 0

    def __init__(self) -> None:
        self.leaders: dict[tuple[str, int], int | Errors] = {}
        self.addresses: dict[int, tuple[str, int]] = {}
        self.local: list[tuple[tuple[str, int], TxnMarker]] = []
        self.moves: dict[tuple[str, int], int] = {}  # leader after the first attempt

    def leader(self, topic: str, partition: int) -> int | Errors:
        return self.leaders[(topic, partition)]

    def address(self, broker_id: int) -> tuple[str, int] | None:
        return self.addresses.get(broker_id)

    async def write_local(
        self, marker: TxnMarker, partitions: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], Errors]:
        self.local += [(tp, marker) for tp in partitions]
        return dict.fromkeys(partitions, Errors.NONE)


def channel(routes: Routes, **kwargs: int) -> TransactionMarkerChannel:
    return TransactionMarkerChannel(routes, backoff_ms=10, max_backoff_ms=20, **kwargs)


def test_markers_go_to_each_leader_and_follow_a_moved_one():
    async def scenario():
        remote = FakeBroker()
        routes = Routes()
        routes.addresses[1] = await remote.start()
        routes.leaders = {("t", 0): 0, ("t", 1): 1, ("t", 2): 1,
                          ("gone", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}  # fmt: skip
        # t-2's leader moved to this broker: the remote answers NOT_LEADER the first time.
        remote.answers[("t", 2)] = [Errors.NOT_LEADER_OR_FOLLOWER]
        original = routes.leader

        def leader(topic: str, partition: int) -> int | Errors:
            if (topic, partition) == ("t", 2) and remote.received:
                return 0
            return original(topic, partition)

        routes.leader = leader  # type: ignore[method-assign]
        ch = channel(routes)
        results = await ch.write(MARKER, [("t", 0), ("t", 1), ("t", 2), ("gone", 0)])
        assert results == {("t", 0): Errors.NONE, ("t", 1): Errors.NONE,
                           ("t", 2): Errors.NONE,
                           ("gone", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}  # fmt: skip
        assert sorted(remote.received) == [(("t", 1), MARKER), (("t", 2), MARKER)]
        assert sorted(routes.local) == [(("t", 0), MARKER), (("t", 2), MARKER)]
        await ch.close()
        await remote.stop()

    asyncio.run(scenario())


def test_an_unreachable_leader_is_retried_until_the_deadline():
    async def scenario():
        routes = Routes()
        routes.leaders = {("t", 0): 2, ("t", 1): Errors.LEADER_NOT_AVAILABLE}
        routes.addresses[2] = ("127.0.0.1", 1)  # nothing listens there
        ch = channel(routes, retry_for_ms=200)
        loop = asyncio.get_running_loop()
        start = loop.time()
        results = await ch.write(MARKER, [("t", 0), ("t", 1)])
        assert results == {("t", 0): Errors.BROKER_NOT_AVAILABLE,
                           ("t", 1): Errors.LEADER_NOT_AVAILABLE}  # fmt: skip
        assert 0.1 < loop.time() - start < 2.0
        await ch.close()

    asyncio.run(scenario())


def test_a_final_error_is_not_retried():
    async def scenario():
        remote = FakeBroker()
        routes = Routes()
        routes.addresses[1] = await remote.start()
        routes.leaders = {("t", 0): 1}
        remote.answers[("t", 0)] = [Errors.INVALID_PRODUCER_EPOCH]
        ch = channel(routes)
        assert await ch.write(MARKER, [("t", 0)]) == {("t", 0): Errors.INVALID_PRODUCER_EPOCH}
        assert len(remote.received) == 1
        await ch.close()
        await remote.stop()

    asyncio.run(scenario())
