"""A misbehaving peer closes its own connection and nothing else (design principle 5).

Targeted cases first — an oversized or negative size prefix, half a frame then EOF, an API key
or version the broker does not speak — each checked on its own connection while a second
connection keeps being answered. Then a bounded fuzz: random frames and mutations of real
requests over many connections to a live broker, while a well-behaved confluent-kafka
producer and consumer keep working beside it and lose nothing.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from sluice.broker.protocol import APIS, ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.broker.server.handlers import HANDLERS
from sluice.broker.server.sasl_session import SASL_API_KEYS
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.broker_process import StartBroker
from tests.broker.server.clients import ContinuousProducer, consumer, unique
from tests.broker.server.seeds import FUZZ_TOPIC, all_seeds
from tests.broker.server.wire import WireClient, frame_of, request

pytestmark = pytest.mark.broker

_INT32 = struct.Struct(">i")
# APIs with a schema in the codec's table that this broker has no handler for (SaslHandshake
# and SaslAuthenticate are the connection's business, served by broker.py before any handler).
_UNHANDLED = sorted(key for key in APIS if key not in HANDLERS and key not in SASL_API_KEYS)
METADATA_ALL = {
    "topics": None,
    "include_cluster_authorized_operations": False,
    "include_topic_authorized_operations": False,
}


def _header(api_key: int, version: int, correlation_id: int, flexible: bool = False) -> bytes:
    """A request header (v1, or v2 with an empty tagged-field section) with client id "t"."""
    head = struct.pack(">hhih", api_key, version, correlation_id, 1) + b"t"
    return head + (b"\x00" if flexible else b"")


def _framed(payload: bytes) -> bytes:
    return _INT32.pack(len(payload)) + payload


@pytest.fixture
def bystander(broker: BrokerProcess) -> Iterator[WireClient]:
    """A well-behaved connection, open before the misbehaving one and checked after it."""
    with WireClient(broker.port) as client:
        assert client.api_versions_ok()
        yield client
        assert client.api_versions_ok(), "a bad peer's connection took another one down"


def test_oversized_size_prefix_closes_only_that_connection(
    broker: BrokerProcess, bystander: WireClient
) -> None:
    with WireClient(broker.port) as bad:
        bad.send_raw(_INT32.pack(104_857_600 + 1))  # one over socket.request.max.bytes
        assert bad.closed_by_peer()
    assert broker.answers()


def test_negative_size_prefix_closes_only_that_connection(
    broker: BrokerProcess, bystander: WireClient
) -> None:
    with WireClient(broker.port) as bad:
        bad.send_raw(_INT32.pack(-5) + b"hello")
        assert bad.closed_by_peer()


def test_truncated_frame_then_eof_closes_only_that_connection(
    broker: BrokerProcess, bystander: WireClient
) -> None:
    whole = frame_of(request(ApiKey.METADATA, 8, METADATA_ALL))
    with WireClient(broker.port) as bad:
        bad.send_raw(whole[: len(whole) // 2])
        bad.sock.shutdown(socket.SHUT_WR)
        assert bad.recv_frame() is None  # closed, nothing answered


def test_complete_frames_before_eof_are_answered(broker: BrokerProcess) -> None:
    """EOF after whole frames is a normal close: what was asked is still answered."""
    with WireClient(broker.port) as client:
        client.send_raw(b"".join(frame_of(request(ApiKey.API_VERSIONS, 0, {}), c) for c in (1, 2)))
        client.sock.shutdown(socket.SHUT_WR)
        assert client.recv_frame() is not None
        assert client.recv_frame() is not None
        assert client.recv_frame() is None


@pytest.mark.parametrize(
    ("api_key", "version"),
    [
        (1000, 0),  # no such API
        (ApiKey.PRODUCE, 10),  # above the implemented range (v0-2 are served, issue 17)
        (ApiKey.FETCH, 13),
        (ApiKey.METADATA, 99),
    ],
    ids=["unknown-key", "produce-v10", "fetch-v13", "metadata-v99"],
)
def test_unsupported_api_closes_only_that_connection(
    broker: BrokerProcess, bystander: WireClient, api_key: int, version: int
) -> None:
    with WireClient(broker.port) as bad:
        bad.send_raw(_framed(_header(api_key, version, 5) + b"\x00" * 16))
        assert bad.recv_frame() is None


def test_api_versions_v99_gets_unsupported_version_and_the_connection_stays(
    broker: BrokerProcess,
) -> None:
    with WireClient(broker.port) as client:
        # A future client: flexible header v2, a body this broker cannot know.
        client.send_raw(_framed(_header(ApiKey.API_VERSIONS, 99, 42, flexible=True) + b"\x07?"))
        frame = client.recv_frame()
        assert frame is not None
        correlation_id, error_code = struct.unpack_from(">ih", frame)
        assert (correlation_id, error_code) == (42, Errors.UNSUPPORTED_VERSION)
        # What librdkafka does next: retry at a version the answer lists; same connection.
        response = client.call(
            request(
                ApiKey.API_VERSIONS,
                3,
                {"client_software_name": "t", "client_software_version": "1"},
            )
        )
        assert response.error_code == Errors.NONE
        ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert ranges[ApiKey.API_VERSIONS] == (0, 3)
        assert ranges[ApiKey.PRODUCE] == (0, 9)
        metadata = client.call(request(ApiKey.METADATA, 8, METADATA_ALL))
        assert metadata.controller_id == 0


# -- fuzz ------------------------------------------------------------------------------------

FUZZ_CONNECTIONS = 2000
FUZZ_WORKERS = 4
FUZZ_SECONDS = 15.0
_INTERESTING_INT32 = [0, 1, -1, 0x7F, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, -0x80000000, 1 << 20]


def mutate(rng: random.Random, payload: bytes) -> bytes:
    """One to four random edits of a request payload (without its size prefix)."""
    data = bytearray(payload)
    for _ in range(rng.randint(1, 4)):
        op = rng.choice(["flip", "byte", "int32", "truncate", "insert", "delete", "duplicate"])
        pos = rng.randrange(len(data) + 1)
        if op == "flip" and data:
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        elif op == "byte" and data:
            data[rng.randrange(len(data))] = rng.choice([0, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        elif op == "int32" and len(data) >= 4:
            i = rng.randrange(len(data) - 3)
            data[i : i + 4] = _INT32.pack(rng.choice(_INTERESTING_INT32))
        elif op == "truncate":
            del data[pos:]
        elif op == "insert":
            data[pos:pos] = rng.randbytes(rng.randint(1, 16))
        elif op == "delete":
            del data[pos : pos + rng.randint(1, 16)]
        elif op == "duplicate":
            data[pos:pos] = data[pos : pos + rng.randint(1, 32)]
    return bytes(data)


def fuzz_bytes(rng: random.Random, seeds: list[bytes]) -> bytes:
    """What one fuzz connection sends: a few frames, mostly mutated real requests, now and
    then random bytes or a valid header over a random body, mostly with a true size prefix."""
    out = bytearray()
    for _ in range(rng.randint(1, 6)):
        roll = rng.random()
        if roll < 0.7:
            payload = mutate(rng, rng.choice(seeds)[4:])
        elif roll < 0.85:
            key = rng.choice([*range(0, 23), *range(23, 70, 7), 1000, -1])
            payload = _header(key, rng.randrange(-1, 16), 9, rng.random() < 0.5)
            payload += rng.randbytes(rng.randint(0, 64))
        else:
            payload = rng.randbytes(rng.randint(0, 64))
        prefix = len(payload)
        if rng.random() < 0.05:
            prefix = rng.choice([-1, 0, len(payload) + 3, len(payload) - 3, 0x7FFFFFFF])
        out += _INT32.pack(prefix) + payload
    return bytes(out)


def _one_fuzz_connection(port: int, data: bytes) -> None:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(1.0)  # a mutated Fetch may wait for up to 24 days: do not
            while sock.recv(65536):
                pass
    except OSError:
        pass  # reset, refused mid-way, timed out: all fine for a fuzz peer


def _drain_values(c: Consumer, count: int, timeout: float) -> list[bytes | None]:
    values: list[bytes | None] = []
    deadline = time.monotonic() + timeout
    while len(values) < count and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            values.append(m.value())
    return values


@pytest.mark.slow
def test_fuzz_never_crashes_and_well_behaved_clients_lose_nothing(
    start_broker: StartBroker,
) -> None:
    broker = start_broker()
    create_topic(broker.bootstrap, FUZZ_TOPIC)
    topic = unique("bystander")
    create_topic(broker.bootstrap, topic)
    seeds = all_seeds()
    assert len(seeds) > 50

    producer = ContinuousProducer(broker.bootstrap, topic, interval=0.005).start()
    c = consumer(broker.bootstrap)
    c.assign([TopicPartition(topic, 0, 0)])
    received: list[bytes | None] = []
    stop = threading.Event()

    def consume_meanwhile() -> None:
        while not stop.is_set():
            received.extend(_drain_values(c, 10**9, 0.2))

    consumer_thread = threading.Thread(target=consume_meanwhile)
    consumer_thread.start()
    started = time.monotonic()
    done = [0] * FUZZ_WORKERS

    def fuzz(worker: int) -> None:
        rng = random.Random(20_240_601 + worker)  # reproducible per worker
        for _ in range(FUZZ_CONNECTIONS // FUZZ_WORKERS):
            if time.monotonic() - started > FUZZ_SECONDS:
                return
            _one_fuzz_connection(broker.port, fuzz_bytes(rng, seeds))
            done[worker] += 1

    try:
        workers = [threading.Thread(target=fuzz, args=(w,)) for w in range(FUZZ_WORKERS)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert broker.running, f"the broker died under fuzzing:\n{broker.output_tail()}"
        assert broker.answers(timeout=5.0), "the broker no longer answers"
        acked_during_fuzz = len(producer.acked)
    finally:
        producer.stop()
        stop.set()
        consumer_thread.join()
    try:
        received.extend(_drain_values(c, producer.sent - len(received), 30))
    finally:
        c.close()
    assert sum(done) >= 100, f"only {sum(done)} fuzz connections in {FUZZ_SECONDS}s"
    assert acked_during_fuzz > 0, "the well-behaved producer made no progress while fuzzed"
    producer.assert_exactly_once(received)
    internal = [
        line
        for line in broker.output().splitlines()
        if "internal error" in line or "Traceback" in line
    ]
    assert not internal, "handlers raised on fuzzed input:\n" + "\n".join(internal[:10])


def test_absurd_partition_count_is_refused(broker: BrokerProcess) -> None:
    """A CreateTopics asking for 2^31 - 1 partitions (one int32 mutation of a real request)
    must be refused, not attempted: every partition is a directory and three open files,
    created on the event loop."""
    name = unique("absurd")
    body = request(
        ApiKey.CREATE_TOPICS,
        4,
        {"topics": [{"name": name, "num_partitions": 0x7FFFFFFF, "replication_factor": 1,
                     "assignments": [], "configs": []}]},
    )  # fmt: skip
    with WireClient(broker.port, timeout=10) as client:
        result = client.call(body).topics[0]
        assert result.error_code == Errors.INVALID_PARTITIONS, result
        metadata = client.call(request(ApiKey.METADATA, 8, METADATA_ALL))
    assert name not in {t.name for t in metadata.topics}


@pytest.mark.slow
def test_topic_needing_more_file_descriptors_than_are_left_is_refused(
    start_broker: StartBroker,
) -> None:
    """With ``ulimit -n 256``, 200 partitions (three open files each) would exhaust the
    broker's descriptors half-way: the request is refused up front with INVALID_PARTITIONS,
    nothing is created, and the broker keeps serving and restarting."""
    broker = start_broker(max_open_files=256)
    name = unique("nofds")
    body = request(
        ApiKey.CREATE_TOPICS,
        4,
        {"topics": [{"name": name, "num_partitions": 200, "replication_factor": 1,
                     "assignments": [], "configs": []}]},
    )  # fmt: skip
    with WireClient(broker.port) as client:
        result = client.call(body).topics[0]
        assert result.error_code == Errors.INVALID_PARTITIONS, result
        assert "file descriptors" in result.error_message
        metadata = client.call(request(ApiKey.METADATA, 8, METADATA_ALL))
        assert name not in {t.name for t in metadata.topics}
    create_topic(broker.bootstrap, unique("fits"), partitions=20)
    broker.restart()
    assert not list(broker.log_dir.glob(f"{name}-*"))


def test_every_api_the_codec_decodes_has_a_handler() -> None:
    """An API in the dispatch table without a handler would be advertised by nothing yet
    decoded and then refused; keep the two tables in step."""
    assert _UNHANDLED == []
