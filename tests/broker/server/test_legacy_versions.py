"""The request versions Kafka 2.x/3.x accept and Kafka 4.0 dropped (issue 17), against a real
broker: old clients (kafka-python pinned to 0.8.2-0.10.1, kcat without ApiVersions) producing
and consuming magic 0/1 message sets, and the legacy admin versions sent by hand.

kafka-python's ``api_version`` pins what it sends: (0, 10, 1) Produce v2 / Fetch v3 (magic 1),
(0, 10, 0) Produce v2 / Fetch v2 (magic 1), (0, 9) Produce v1 / Fetch v1 (magic 0), (0, 8, 2)
Produce v0 / Fetch v0 (magic 0).
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import time
import warnings
import zlib
from typing import Any

import pytest

from sluice.broker.log.records import encode_batch
from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.testing.broker import BrokerProcess
from tests.broker.server.clients import Msg, consume, produce, unique
from tests.broker.server.wire import WireClient, request

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    pytest.importorskip("kafka")
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

pytestmark = [
    pytest.mark.broker,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]

BASE_TS = 1_700_000_000_000


def _create(broker: BrokerProcess, topic: str, partitions: int = 1) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="sluice-legacy")
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)], timeout_ms=10_000)
    finally:
        admin.close()


def _messages(n: int, magic: int) -> list[tuple[bytes | None, bytes, int | None]]:
    return [
        (
            None if i % 3 == 0 else f"k{i}".encode(),
            f"value {i} ".encode() * (i % 7 + 1),
            BASE_TS + i * 1000 if magic else None,
        )
        for i in range(n)
    ]


def _old_produce(
    broker: BrokerProcess,
    topic: str,
    api_version: tuple[int, ...],
    messages: list[tuple[bytes | None, bytes, int | None]],
    codec: str | None,
) -> list[int]:
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        api_version=api_version,
        compression_type=codec,
        linger_ms=50,
        acks=1,
    )
    try:
        futures = [
            producer.send(topic, key=k, value=v, partition=0, timestamp_ms=ts)
            for k, v, ts in messages
        ]
        producer.flush(30)
        return [f.get(timeout=30).offset for f in futures]
    finally:
        producer.close(timeout=10)


def _old_consume(
    broker: BrokerProcess, topic: str, api_version: tuple[int, ...], count: int
) -> list[Any]:
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        api_version=api_version,
        enable_auto_commit=False,
        consumer_timeout_ms=20_000,
    )
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                got.extend(records)
        return got
    finally:
        consumer.close()


CASES = [
    ((0, 10, 1), 1, None),
    ((0, 10, 1), 1, "gzip"),
    ((0, 10, 1), 1, "snappy"),
    ((0, 10, 1), 1, "lz4"),
    ((0, 10, 0), 1, "gzip"),
    ((0, 9), 0, None),
    ((0, 9), 0, "gzip"),
    ((0, 9), 0, "snappy"),
    ((0, 8, 2), 0, None),
    ((0, 8, 2), 0, "gzip"),
]


@pytest.mark.parametrize(
    ("api_version", "magic", "codec"),
    CASES,
    ids=[f"{'.'.join(map(str, v))}-{c or 'none'}" for v, _, c in CASES],
)
def test_old_kafka_python_round_trip(
    broker: BrokerProcess, api_version: tuple[int, ...], magic: int, codec: str | None
) -> None:
    topic = unique("legacy")
    _create(broker, topic)
    messages = _messages(25, magic)
    offsets = _old_produce(broker, topic, api_version, messages, codec)
    assert offsets == list(range(25))  # the broker assigns them, one after the other
    got = _old_consume(broker, topic, api_version, len(messages))
    assert [(r.offset, r.key, r.value) for r in got] == [
        (i, k, v) for i, (k, v, _) in enumerate(messages)
    ]
    if magic == 1:
        assert [r.timestamp for r in got] == [ts for _, _, ts in messages]
    else:
        assert all(r.timestamp in (None, -1) for r in got)
    # A current client reads what the old one wrote, as v2 batches.
    current = consume(broker.bootstrap, topic, {0: len(messages)})[0]
    assert [(m.key(), m.value()) for m in current] == [(k, v) for k, v, _ in messages]
    if magic == 1:
        assert [m.timestamp()[1] for m in current] == [ts for _, _, ts in messages]


@pytest.mark.parametrize("api_version", [(0, 10, 1), (0, 9), (0, 8, 2)])
@pytest.mark.parametrize("compression", ["none", "gzip", "lz4", "zstd"])
def test_old_consumer_reads_current_batches(
    broker: BrokerProcess, api_version: tuple[int, ...], compression: str
) -> None:
    """Batches from a current producer (headers, any codec) down-converted for old fetches:
    headers dropped, keys, values, offsets (and, magic 1, timestamps) kept; zstd is
    UNSUPPORTED_COMPRESSION_TYPE below Fetch v10, as on Kafka."""
    topic = unique("legacy-down")
    msgs = [
        Msg(f"k{i}".encode(), f"v{i}".encode() * 10, (("h", b"x"),), BASE_TS + i) for i in range(30)
    ]
    produce(broker.bootstrap, topic, msgs, partition=0, compression_type=compression)
    if compression == "zstd":
        body = request(
            ApiKey.FETCH,
            3 if api_version >= (0, 10, 1) else 1,
            {
                "replica_id": -1,
                "max_wait": 0,
                "min_bytes": 0,
                "max_bytes": 1 << 20,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                        ],
                    }
                ],
            },
        )
        with WireClient(broker.port) as client:
            partition = client.call(body).responses[0].partitions[0]
        assert int(partition.error_code) == Errors.UNSUPPORTED_COMPRESSION_TYPE
        assert partition.records == b""
        return
    got = _old_consume(broker, topic, api_version, len(msgs))
    assert [(r.offset, r.key, r.value) for r in got] == [
        (i, m.key, m.value) for i, m in enumerate(msgs)
    ]
    if api_version >= (0, 10):
        assert [r.timestamp for r in got] == [m.timestamp for m in msgs]


def test_kcat_without_api_versions(broker: BrokerProcess, tmp_path: Any) -> None:
    """kcat (librdkafka) told the broker is 0.9.0: no ApiVersions, Produce v1 / Fetch v1 with
    magic-0 message sets."""
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.fail("kcat is not installed")
    topic = unique("legacy-kcat")
    _create(broker, topic)
    legacy = ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.9.0"]
    lines = [f"key{i}:value {i}" for i in range(20)]
    subprocess.run(
        [kcat, "-b", broker.bootstrap, "-P", "-t", topic, "-p", "0", "-K:", "-z", "gzip", *legacy],
        input="\n".join(lines) + "\n",
        text=True,
        check=True,
        timeout=60,
    )
    out = subprocess.run(
        [
            kcat,
            "-b",
            broker.bootstrap,
            "-C",
            "-t",
            topic,
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%o %k %s\n",
            *legacy,
        ],  # fmt: skip
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.splitlines() == [f"{i} key{i} value {i}" for i in range(20)]


def _message_v0(key: bytes, value: bytes, *, corrupt: bool = False) -> bytes:
    body = b"\x00\x00" + struct.pack(">i", len(key)) + key + struct.pack(">i", len(value)) + value
    crc = zlib.crc32(body) ^ (1 if corrupt else 0)
    message = struct.pack(">I", crc) + body
    return struct.pack(">qi", 0, len(message)) + message


def test_produce_v0_bad_crc_is_corrupt_message(broker: BrokerProcess) -> None:
    topic = unique("legacy-crc")
    _create(broker, topic, partitions=2)
    with WireClient(broker.port) as client:
        body = request(
            ApiKey.PRODUCE,
            0,
            {
                "acks": 1,
                "timeout": 10_000,
                "topic_data": [
                    {
                        "name": topic,
                        "partition_data": [
                            {"index": 0, "records": _message_v0(b"k", b"bad", corrupt=True)},
                            {"index": 1, "records": _message_v0(b"k", b"good")},
                        ],
                    }
                ],
            },
        )
        partitions = client.call(body).responses[0].partition_responses
    assert [(p.index, int(p.error_code)) for p in partitions] == [
        (0, Errors.CORRUPT_MESSAGE),
        (1, Errors.NONE),
    ]
    assert partitions[1].base_offset == 0


def test_legacy_admin_versions(broker: BrokerProcess) -> None:
    """One request at each admin version Kafka 4.0 dropped, each answered at its version."""
    topic, group = unique("legacy-admin"), unique("legacy-group")
    with WireClient(broker.port) as client:
        created = client.call(
            request(
                ApiKey.CREATE_TOPICS,
                0,
                {
                    "topics": [
                        {
                            "name": topic,
                            "num_partitions": 2,
                            "replication_factor": 1,
                            "assignments": [],
                            "configs": [],
                        }
                    ],
                    "timeout": 10_000,
                },
            )
        )
        assert [(t.name, int(t.error_code)) for t in created.topics] == [(topic, 0)]
        # Metadata v0: an empty topic list is every topic.
        everything = client.call(request(ApiKey.METADATA, 0, {"topics": []}))
        assert topic in {t.name for t in everything.topics}
        one = client.call(request(ApiKey.METADATA, 0, {"topics": [{"name": topic}]}))
        assert [(t.name, len(t.partitions)) for t in one.topics] == [(topic, 2)]
        # OffsetCommit v0 and v1, read back with OffsetFetch v0.
        for version, offset in ((0, 7), (1, 11)):
            values: dict[str, Any] = {
                "group_id": group,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": version,
                                "committed_offset": offset,
                                "committed_metadata": f"v{version}",
                            }
                        ],
                    }  # fmt: skip
                ],
            }
            if version == 1:
                values |= {"generation_id_or_member_epoch": -1, "member_id": ""}
            committed = client.call(request(ApiKey.OFFSET_COMMIT, version, values))
            assert int(committed.topics[0].partitions[0].error_code) == 0
        fetched = client.call(
            request(
                ApiKey.OFFSET_FETCH,
                0,
                {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0, 1]}]},
            )
        )
        assert [
            (p.partition_index, p.committed_offset, p.metadata, int(p.error_code))
            for p in fetched.topics[0].partitions
        ] == [(0, 7, "v0", 0), (1, 11, "v1", 0)]
        # DescribeConfigs v0: is_default instead of config_source.
        configs = client.call(
            request(
                ApiKey.DESCRIBE_CONFIGS,
                0,
                {
                    "resources": [
                        {
                            "resource_type": 2,
                            "resource_name": topic,
                            "configuration_keys": ["cleanup.policy"],
                        }
                    ]
                },  # fmt: skip
            )
        )
        (entry,) = configs.results[0].configs
        assert (entry.name, entry.value, entry.is_default) == ("cleanup.policy", "delete", True)

        # OffsetForLeaderEpoch v0 and v1 answer what v2 answers.
        def epoch_request(version: int) -> Any:
            partition: dict[str, Any] = {"partition": 0, "leader_epoch": 0}
            if version >= 2:
                partition["current_leader_epoch"] = -1
            topics = [{"topic": topic, "partitions": [partition]}]
            return request(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, {"topics": topics})

        client.produce(topic, 0, encode_batch([(b"k", b"v")]), version=3)
        current = client.call(epoch_request(2)).topics[0].partitions[0]
        assert (int(current.error_code), current.leader_epoch, current.end_offset) == (0, 0, 1)
        for version in (0, 1):
            answer = client.call(epoch_request(version)).topics[0].partitions[0]
            assert (int(answer.error_code), answer.end_offset) == (0, 1)
            if version == 1:
                assert answer.leader_epoch == 0
        # DescribeLogDirs v0: every partition.
        dirs = client.call(request(ApiKey.DESCRIBE_LOG_DIRS, 0, {"topics": None}))
        assert topic in {t.name for r in dirs.results for t in r.topics}
        # The ACL APIs at v0 answer (SECURITY_DISABLED without an authorizer).
        acls = client.call(
            request(
                ApiKey.DESCRIBE_ACLS,
                0,
                {
                    "resource_type_filter": 1,
                    "resource_name_filter": None,
                    "principal_filter": None,
                    "host_filter": None,
                    "operation": 1,
                    "permission_type": 1,
                },  # fmt: skip
            )
        )
        assert int(acls.error_code) in (Errors.NONE, Errors.SECURITY_DISABLED)
        deleted = client.call(
            request(ApiKey.DELETE_TOPICS, 0, {"topic_names": [topic], "timeout": 10_000})
        )
        assert [(t.name, int(t.error_code)) for t in deleted.responses] == [(topic, 0)]
