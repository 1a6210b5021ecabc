"""The broker's fetch path as a fraction of a raw ``os.sendfile`` of the same segment over
loopback, and the pieces the cross-system benchmarks (``bench_peers``) reuse for Sluice: the
broker process (``sluice.testing``'s, as in the tests) and confluent-kafka's produce loop."""

from __future__ import annotations

import os
import shutil
import socket
import struct
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from bench.results import Results
from sluice.broker.protocol.apis import request_type
from sluice.broker.protocol.build import build
from sluice.broker.protocol.codec import encode_request
from sluice.testing.broker import BrokerProcess

MESSAGE = 200


def start_broker(work: Path) -> BrokerProcess:
    """A started standalone broker (``sluice.testing.broker.BrokerProcess``) with its log in
    ``<work>/broker`` and its output in ``<work>/broker.out``: one partition per new topic,
    default asynchronous flushing, warnings only. The caller stops it."""
    broker = BrokerProcess(
        work, {"num.partitions": "1"}, log_level="warning", log_dir=work / "broker"
    )
    return broker.start()


def produce(bootstrap: str, topic: str, count: int, settings: dict[str, Any]) -> float:
    """Seconds to produce ``count`` messages and have every one acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, **settings})
    payload = os.urandom(MESSAGE)
    failed = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(err)

    start = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, payload, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(120)
    elapsed = time.perf_counter() - start
    if failed:
        raise RuntimeError(f"{len(failed)} messages failed: {failed[0]}")
    return elapsed


def raw_fetch_rate(bootstrap_port: int, topic: str, end_offset: int) -> float:
    """MB/s of Fetch v11 responses (1 MiB each, no long poll) read by a minimal client that
    discards them, from offset 0 to ``end_offset``, after one warm-up request."""
    sock = socket.create_connection(("127.0.0.1", bootstrap_port))
    buf = bytearray(8 << 20)
    fetch_type = request_type(1, 11)

    def fetch(cid: int, offset: int) -> tuple[int, int]:
        body = build(fetch_type, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": "",
        })  # fmt: skip
        sock.sendall(encode_request(cid, "bench", body))
        size = struct.unpack(">i", _read_exact(sock, 4, buf))[0]
        return size, _next_offset_in(_read_exact(sock, size, buf))

    fetch(1, 0)  # warm-up: the first request pays one-time costs on both sides
    offset, received, cid = 0, 0, 1
    start = time.perf_counter()
    while offset < end_offset:
        cid += 1
        size, offset = fetch(cid, offset)
        received += size
        if offset < 0:
            raise RuntimeError(f"{topic}: a fetch at {offset} returned no records")
    elapsed = time.perf_counter() - start
    sock.close()
    return received / 1e6 / elapsed


def _read_exact(sock: socket.socket, n: int, buf: bytearray) -> memoryview:
    view = memoryview(buf)[:n]
    got = 0
    while got < n:
        r = sock.recv_into(view[got:], n - got)
        if r == 0:
            raise ConnectionError("broker closed the connection")
        got += r
    return view


def _next_offset_in(resp: memoryview) -> int:
    # Fetch v11 response, one topic, one partition: walk to the records, then their batches.
    pos = 4 + 4 + 2 + 4  # correlation id, throttle, error, session id
    pos += 4  # topics count
    (name_len,) = struct.unpack_from(">h", resp, pos)
    pos += 2 + name_len + 4  # name, partitions count
    pos += 4 + 2 + 8 + 8 + 8  # index, error, hw, lso, log start
    (aborted,) = struct.unpack_from(">i", resp, pos)
    pos += 4 + max(aborted, 0) * 16 + 4  # aborted txns, preferred read replica
    (size,) = struct.unpack_from(">i", resp, pos)
    pos += 4
    end, next_offset = pos + size, -1
    while pos + 12 <= end:
        base, length = struct.unpack_from(">qi", resp, pos)
        (delta,) = struct.unpack_from(">i", resp, pos + 23)
        next_offset = base + delta + 1
        pos += 12 + length
    return next_offset


def raw_sendfile_rate(path: Path) -> float:
    """MB/s of os.sendfile of ``path`` to a loopback TCP socket read by the same kind of
    client (recv_into a buffer, discard)."""
    size = path.stat().st_size
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def send() -> None:
        conn, _ = server.accept()
        with open(path, "rb") as f:
            sent = 0
            while sent < size:
                sent += os.sendfile(conn.fileno(), f.fileno(), sent, min(1 << 20, size - sent))
        conn.close()

    thread = threading.Thread(target=send)
    thread.start()
    client = socket.create_connection(("127.0.0.1", port))
    buf = bytearray(1 << 20)
    got = 0
    start = time.perf_counter()
    while got < size:
        n = client.recv_into(buf)
        if n == 0:
            break
        got += n
    elapsed = time.perf_counter() - start
    thread.join()
    client.close()
    server.close()
    return got / 1e6 / elapsed


def run(results: Results, quick: bool) -> None:
    """The fetch path against a raw sendfile of the same segment. (Produce and consume
    throughput, Sluice's beside the other systems', are in bench_peers.)"""
    count = 1_000_000 if quick else 5_000_000
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-", dir="."))
    broker = start_broker(work)
    try:
        topic = "bench-fetch"
        produce(broker.bootstrap, topic, count, {"batch.num.messages": 50, "linger.ms": 5})
        segment = next((broker.log_dir / f"{topic}-0").glob("*.log"))
        fetch = raw_fetch_rate(broker.port, topic, count)
        raw = raw_sendfile_rate(segment)
        results.add("fetch_path", "raw os.sendfile", "loopback", raw, "MB/s")
        results.add("fetch_path", "sluice Fetch v11", "loopback", fetch, "MB/s")
        results.add("fetch_path", "sluice/raw sendfile", "loopback", fetch / raw, "ratio")
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
