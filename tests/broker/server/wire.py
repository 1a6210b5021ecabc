"""``WireClient``: Kafka requests by hand over a blocking socket, for what real clients never
send — a resent batch, a sequence gap, garbage, half a frame.

Requests are kio dataclasses built from plain dicts (``sluice.broker.protocol.build``) and encoded
by
``sluice.broker.protocol.codec.encode_request``; responses come back decoded by ``decode_response``.
"""

from __future__ import annotations

import socket
import struct
import uuid
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from sluice.broker.protocol import ApiKey, decode_response, encode_request
from sluice.broker.protocol.apis import request_type
from sluice.broker.protocol.build import build

_SIZE = struct.Struct(">i")


def request(api_key: int, version: int, values: Mapping[str, Any]) -> Any:
    """The kio request dataclass of ``api_key`` v``version`` built from ``values``."""
    return build(request_type(api_key, version), values)


def frame_of(body: Any, correlation_id: int = 1, client_id: str | None = "sluice-wire") -> bytes:
    """A complete request on the wire: size prefix, header, body."""
    return encode_request(correlation_id, client_id, body)


class WireClient:
    """One blocking connection to a broker; not thread-safe."""

    def __init__(self, port: int, *, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self._correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- raw bytes -------------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _recv_exactly(self, n: int) -> bytes | None:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                return None
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def recv_frame(self) -> bytes | None:
        """The next response frame without its size prefix; None if the broker closed."""
        prefix = self._recv_exactly(4)
        if prefix is None:
            return None
        (size,) = _SIZE.unpack(prefix)
        return self._recv_exactly(size)

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """Whether the broker closes this connection within ``timeout`` (reading and
        discarding whatever it still sends)."""
        self.sock.settimeout(timeout)
        try:
            while self.sock.recv(65536):
                pass
            return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    # -- requests --------------------------------------------------------------------------

    def send(self, body: Any) -> int:
        """Send a kio request; returns its correlation id."""
        self._correlation_id += 1
        self.send_raw(frame_of(body, self._correlation_id))
        return self._correlation_id

    def call(self, body: Any) -> Any:
        """Send a kio request and return the decoded response body."""
        correlation_id = self.send(body)
        frame = self.recv_frame()
        if frame is None:
            raise ConnectionError(f"the broker closed the connection instead of answering {body}")
        got, response = decode_response(frame, int(body.__api_key__), int(body.__version__))
        assert got == correlation_id, f"expected correlation id {correlation_id}, found {got}"
        return response

    def api_versions_ok(self) -> bool:
        response = self.call(request(ApiKey.API_VERSIONS, 0, {}))
        return int(response.error_code) == 0 and bool(response.api_keys)

    # -- the requests the tests send by hand ------------------------------------------------

    def produce(
        self, topic: str, partition: int, records: bytes, *, acks: int = -1, version: int = 8
    ) -> Any:
        """One Produce request with ``records`` (one batch) for one partition; the
        partition's response (``error_code``, ``base_offset`` ...)."""
        body = request(
            ApiKey.PRODUCE,
            version,
            {
                "acks": acks,
                "timeout": 10_000,
                "topic_data": [
                    {"name": topic, "partition_data": [{"index": partition, "records": records}]}
                ],
            },
        )
        return self.call(body).responses[0].partition_responses[0]

    def init_producer_id(self) -> tuple[int, int]:
        """A new producer id and epoch (InitProducerId v1, no transactional id)."""
        response = self.call(
            request(
                ApiKey.INIT_PRODUCER_ID,
                1,
                {"transactional_id": None, "transaction_timeout": 60_000},
            )
        )
        assert int(response.error_code) == 0, response
        return int(response.producer_id), int(response.producer_epoch)

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        max_bytes: int = 50 << 20,
    ) -> Any:
        """One Fetch v11 for one partition; the partition's response (``error_code``,
        ``high_watermark``, ``records`` ...)."""
        body = request(
            ApiKey.FETCH,
            11,
            {
                "max_wait": max_wait_ms,
                "min_bytes": min_bytes,
                "max_bytes": max_bytes,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {
                                "partition": partition,
                                "current_leader_epoch": -1,
                                "fetch_offset": offset,
                                "log_start_offset": -1,
                                "partition_max_bytes": max_bytes,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
            },
        )
        return self.call(body).responses[0].partitions[0]

    def topic_id(self, topic: str) -> uuid.UUID:
        """The topic's id, as Metadata v12 answers it (an error code fails the test)."""
        body = request(ApiKey.METADATA, 12, {
            "topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False,
        })  # fmt: skip
        (found,) = self.call(body).topics
        assert found.error_code == 0, found
        return uuid.UUID(str(found.topic_id))

    def list_offset(self, topic: str, partition: int, timestamp: int) -> int:
        """ListOffsets v5: -1 latest, -2 earliest, else the first offset at or after."""
        body = request(
            ApiKey.LIST_OFFSETS,
            5,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": partition, "current_leader_epoch": -1,
                             "timestamp": timestamp}
                        ],
                    }
                ],
            },
        )  # fmt: skip
        answer = self.call(body).topics[0].partitions[0]
        assert int(answer.error_code) == 0, answer
        return int(answer.offset)
