"""The broker's fetch path as a fraction of a raw ``os.sendfile`` of the same segment over
loopback, and the pieces the cross-system benchmarks (``bench_peers``) reuse for Sluice: the
broker process (``sluice.testing``'s, as in the tests) and confluent-kafka's produce loop.

Each side is timed for at least ``PHASE_SECONDS`` (the segment is read again from the start
as often as needed) and measured ``REPEATS`` times, the two sides alternating so that a change
in the machine's load hits both; the ratio's spread pairs the i-th Fetch with the i-th raw run.
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from bench.results import REPEATS, Results
from sluice.broker.protocol.apis import request_type
from sluice.broker.protocol.build import build
from sluice.broker.protocol.codec import encode_request
from sluice.testing.broker import BrokerProcess

MESSAGE = 200
PHASE_SECONDS = 3.0  # every timed phase lasts at least this long, quick or full
LOOPS = ("asyncio", "uvloop")
REPO = Path(__file__).resolve().parent.parent  # where ``bench`` imports from


class LauncherBroker(BrokerProcess):
    """``BrokerProcess`` started through ``python -m bench.uvloop_broker`` instead of
    ``python -m sluice``: the same command line, under uvloop's event loop."""

    def command(self) -> list[str]:
        args = super().command()
        at = args.index("-m")
        return [*args[:at], "-m", "bench.uvloop_broker", *args[at + 2 :]]

    def environment(self) -> dict[str, str]:
        env = super().environment()
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
        return env


def ensure_uvloop() -> str:
    """uvloop's version, installed into this environment (pip) when missing."""
    try:
        import uvloop
    except ImportError:
        print("  pip install uvloop", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "uvloop"], check=True)
        import uvloop
    return str(uvloop.__version__)


def start_broker(work: Path, loop: str = "asyncio") -> BrokerProcess:
    """A started standalone broker (``sluice.testing.broker.BrokerProcess``) with its log in
    ``<work>/broker`` and its output in ``<work>/broker.out``: one partition per new topic,
    default asynchronous flushing, warnings only; ``loop="uvloop"`` runs it under uvloop
    (``bench.uvloop_broker``). The caller stops it."""
    if loop not in LOOPS:
        raise ValueError(f"unknown event loop {loop!r}; expected one of {LOOPS}")
    kind = BrokerProcess
    if loop == "uvloop":
        ensure_uvloop()
        kind = LauncherBroker
    broker = kind(work, {"num.partitions": "1"}, log_level="warning", log_dir=work / "broker")
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


def raw_fetch_rate(
    bootstrap_port: int, topic: str, end_offset: int, min_seconds: float = 0.0
) -> float:
    """MB/s of Fetch v11 responses (1 MiB each, no long poll) read by a minimal client that
    discards them, from offset 0 to ``end_offset`` — again from 0 until ``min_seconds`` have
    passed —, after one warm-up request.

    The client stands in for a consumer written in C, as librdkafka is: one request at a time,
    and between two requests only what a consumer must do — find the next offset (a walk over
    the batch headers) and put it in the next request (two ``struct`` patches of one request
    built once). Each request built afresh by the generic protocol builder cost 48 µs of Python,
    the batch walk with unprecompiled ``struct`` calls another 45 µs: the broker sat idle for
    that time (it was 37 % of its wall time in a py-spy profile), so the figure measured this
    client as much as the broker."""
    client = FetchClient(bootstrap_port, topic)
    client.fetch(0)  # warm-up: the first request pays one-time costs on both sides
    offset, received = 0, 0
    start = time.perf_counter()
    while True:
        if offset >= end_offset:
            if time.perf_counter() - start >= min_seconds:
                break
            offset = 0
        asked = offset
        size, offset = client.fetch(offset)
        received += size
        if offset < 0:
            raise RuntimeError(f"{topic}: a fetch at {asked} returned no records")
    elapsed = time.perf_counter() - start
    client.close()
    return received / 1e6 / elapsed


class FetchClient:
    """The minimal Fetch v11 client of ``raw_fetch_rate``: one connection to a broker on
    127.0.0.1, one request for partition 0 of a topic built once, and per fetch only the
    offset and correlation id patched in, the response read into one buffer and its batch
    headers walked; ``timeout`` bounds each socket call (None: none, as the benchmark runs).
    Not thread-safe (one request at a time)."""

    def __init__(self, port: int, topic: str, timeout: float | None = None) -> None:
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self._buf = bytearray(8 << 20)
        self._request, self._offset_at, self._id_at = _fetch_request_template(topic)
        self._correlation_id = 0

    def fetch(self, offset: int) -> tuple[int, int]:
        """(size of the response, the offset after its last batch; -1 when it held none)."""
        self._correlation_id += 1
        _OFFSET.pack_into(self._request, self._offset_at, offset)
        _INT32.pack_into(self._request, self._id_at, self._correlation_id)
        self._sock.sendall(self._request)
        size = _INT32.unpack(_read_exact(self._sock, 4, self._buf))[0]
        return size, _next_offset_in(_read_exact(self._sock, size, self._buf))

    def close(self) -> None:
        self._sock.close()


_OFFSET = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_BATCH_HEAD = struct.Struct(">qi")  # a record batch's base offset and length
# Values no real request holds, to find where the fetch offset and correlation id sit.
_OFFSET_MARK, _ID_MARK = 0x0123456789ABCDEF, 0x7A7A7A7A


def _fetch_request_template(topic: str) -> tuple[bytearray, int, int]:
    """A framed Fetch v11 request for partition 0 of ``topic`` (1 MiB, no long poll), and
    where in it the fetch offset (int64) and the correlation id (int32) are."""
    body = build(request_type(1, 11), {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": _OFFSET_MARK,
            "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": "",
    })  # fmt: skip
    request = bytearray(encode_request(_ID_MARK, "bench", body))
    offset_at = request.find(_OFFSET.pack(_OFFSET_MARK))
    id_at = request.find(_INT32.pack(_ID_MARK))
    if offset_at < 0 or id_at < 0 or request.count(_OFFSET.pack(_OFFSET_MARK)) != 1:
        raise RuntimeError("expected the fetch offset and correlation id once in the request")
    return request, offset_at, id_at


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
    """The offset after the last batch of a Fetch v11 response for one partition (-1: no
    batch), walking the batch headers to the last one."""
    pos = 4 + 4 + 2 + 4  # correlation id, throttle, error, session id
    pos += 4  # topics count
    (name_len,) = struct.unpack_from(">h", resp, pos)
    pos += 2 + name_len + 4  # name, partitions count
    pos += 4 + 2 + 8 + 8 + 8  # index, error, hw, lso, log start
    (aborted,) = struct.unpack_from(">i", resp, pos)
    pos += 4 + max(aborted, 0) * 16 + 4  # aborted txns, preferred read replica
    (size,) = struct.unpack_from(">i", resp, pos)
    pos += 4
    end, last = pos + size, -1
    head = _BATCH_HEAD.unpack_from
    while pos + 12 <= end:
        length = head(resp, pos)[1]
        if pos + 12 + length > end:  # a partial batch at the end: not one to count
            break
        last = pos
        pos += 12 + length
    if last < 0:
        return -1
    base = head(resp, last)[0]
    (delta,) = _INT32.unpack_from(resp, last + 23)  # lastOffsetDelta
    return int(base + delta + 1)


def raw_sendfile_rate(path: Path, min_seconds: float = 0.0) -> float:
    """MB/s of os.sendfile of ``path`` to a loopback TCP socket read by the same kind of
    client (recv_into a buffer, discard): the whole file, as many times over one connection as
    it takes to last ``min_seconds`` (estimated from an untimed first pass of up to 256 MiB)."""
    size = path.stat().st_size
    probe = min(size, 256 << 20)
    got, seconds = sendfile_over_loopback(path, probe, 1)
    per_pass = seconds * size / max(got, 1)
    passes = max(1, math.ceil(min_seconds / max(per_pass, 1e-6)))
    got, seconds = sendfile_over_loopback(path, size, passes)
    return got / 1e6 / seconds


def sendfile_over_loopback(path: Path, size: int, passes: int) -> tuple[int, float]:
    """(bytes received, seconds): the first ``size`` bytes of ``path`` sent ``passes`` times
    with ``os.sendfile`` (1 MiB per call) to a loopback client that reads and discards them."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def send() -> None:
        conn, _ = server.accept()
        with open(path, "rb") as f:
            for _ in range(passes):
                sent = 0
                while sent < size:
                    sent += os.sendfile(conn.fileno(), f.fileno(), sent, min(1 << 20, size - sent))
        conn.close()

    thread = threading.Thread(target=send)
    thread.start()
    client = socket.create_connection(("127.0.0.1", port))
    buf = bytearray(1 << 20)
    got, total = 0, size * passes
    start = time.perf_counter()
    while got < total:
        n = client.recv_into(buf)
        if n == 0:
            break
        got += n
    elapsed = time.perf_counter() - start
    thread.join()
    client.close()
    server.close()
    return got, elapsed


def run(results: Results, quick: bool, loop: str = "asyncio") -> None:
    """The fetch path against a raw sendfile of the same segment, ``REPEATS`` times each,
    alternating. (Produce and consume throughput, Sluice's beside the other systems', are in
    bench_peers.)"""
    count = 1_000_000 if quick else 5_000_000
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-", dir="."))
    broker = start_broker(work, loop)
    name = "sluice Fetch v11" + ("" if loop == "asyncio" else f" ({loop})")
    try:
        topic = "bench-fetch"
        produce(broker.bootstrap, topic, count, {"batch.num.messages": 50, "linger.ms": 5})
        segment = next((broker.log_dir / f"{topic}-0").glob("*.log"))
        fetches, raws = [], []
        for _ in range(REPEATS):
            fetches.append(raw_fetch_rate(broker.port, topic, count, PHASE_SECONDS))
            raws.append(raw_sendfile_rate(segment, PHASE_SECONDS))
        results.add_runs("fetch_path", "raw os.sendfile", "loopback", raws, "MB/s")
        results.add_runs("fetch_path", name, "loopback", fetches, "MB/s")
        ratios = [f / r for f, r in zip(fetches, raws, strict=True)]
        results.add_runs("fetch_path", "sluice/raw sendfile", "loopback", ratios, "ratio")
        results.note("fetch_path", f"each side timed for at least {PHASE_SECONDS:.0f} s (the "
                     f"{segment.stat().st_size / 1e6:,.0f} MB segment read again from the start "
                     f"as needed), {REPEATS} times alternating; median [min .. max]; load "
                     f"average {load_average()}")  # fmt: skip
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


def load_average() -> str:
    """The 1-minute load average now (the machine may be shared: it says how noisy)."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "unknown"
