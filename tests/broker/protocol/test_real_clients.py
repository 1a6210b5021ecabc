"""Real bytes from real clients: kafka-python's encoders and librdkafka on a socket.

The codec must read what the clients actually send, not just what kio writes.
"""

from __future__ import annotations

import socket
import threading
import time
import warnings
from datetime import timedelta
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from sluice.broker.protocol import apis
from sluice.broker.protocol.codec import (
    Request,
    decode_request,
    encode_response,
    encode_unsupported_version,
)
from sluice.broker.protocol.errors import UnsupportedVersion
from sluice.broker.protocol.framing import NEED_DATA, FrameDecoder

with warnings.catch_warnings():
    # kafka-python loads its JSON schemas with a deprecated importlib.resources call.
    warnings.simplefilter("ignore", DeprecationWarning)
    pytest.importorskip("kafka.protocol")
    from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest, DescribeAclsRequest
    from kafka.protocol.consumer import (
        FetchRequest,
        HeartbeatRequest,
        JoinGroupRequest,
        ListOffsetsRequest,
        OffsetCommitRequest,
        OffsetFetchRequest,
        OffsetForLeaderEpochRequest,
        SyncGroupRequest,
    )
    from kafka.protocol.metadata import (
        ApiVersionsRequest,
        ApiVersionsResponse,
        FindCoordinatorRequest,
        MetadataRequest,
    )
    from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
    from kafka.record.memory_records import MemoryRecordsBuilder


def kp_frame(message: Any, corr: int = 17, client_id: str = "kafka-python-test") -> bytes:
    """Frame a kafka-python request exactly as its KafkaProtocol.send_request does."""
    message.with_header(correlation_id=corr, client_id=client_id)
    return bytes(message.encode(framed=True, header=True))


def decode_one(wire: bytes) -> Request:
    decoder = FrameDecoder()
    decoder.receive_data(wire)
    frame = decoder.next_frame()
    assert isinstance(frame, bytes)
    assert decoder.next_frame() is NEED_DATA
    request = decode_request(frame)
    assert request.correlation_id == 17
    assert request.header.client_id == "kafka-python-test"
    return request


def record_batch() -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for i in range(10):
        builder.append(timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"v" * 100)
    builder.close()
    return bytes(builder.buffer())


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_api_versions(version: int) -> None:
    kwargs = {}
    if version >= 3:
        kwargs = {"client_software_name": "kafka-python", "client_software_version": "3.0.12"}
    request = decode_one(kp_frame(ApiVersionsRequest[version](**kwargs)))
    assert request.api_key == 18 and request.api_version == version
    if version >= 3:
        assert request.header.header_version == 2
        assert request.body.client_software_name == "kafka-python"
        assert request.body.client_software_version == "3.0.12"


def test_api_versions_v4_from_kafka_python_gets_error_35() -> None:
    # kafka-python 3 starts at ApiVersions v4; Sluice implements 0-3.
    wire = kp_frame(ApiVersionsRequest[4](client_software_name="kp", client_software_version="3"))
    with pytest.raises(UnsupportedVersion) as info:
        decode_one(wire)
    answer = encode_unsupported_version(info.value)
    # kafka-python decodes it with its own v0 response parser.
    parsed = ApiVersionsResponse[0].decode(answer[4:], header=True)
    assert parsed.header.correlation_id == 17
    assert parsed.error_code == 35
    keys = {k.api_key: (k.min_version, k.max_version) for k in parsed.api_keys}
    assert keys[18] == (0, 3)


@pytest.mark.parametrize("version", range(1, 9))
def test_metadata(version: int) -> None:
    kwargs: dict[str, Any] = {
        "topics": [MetadataRequest.MetadataRequestTopic(name="events")],
    }
    if version >= 4:
        kwargs["allow_auto_topic_creation"] = False
    request = decode_one(kp_frame(MetadataRequest[version](**kwargs)))
    assert [t.name for t in request.body.topics] == ["events"]
    if version >= 4:
        assert request.body.allow_auto_topic_creation is False


@pytest.mark.parametrize("version", range(3, 9))
def test_produce_carries_the_record_batch_byte_for_byte(version: int) -> None:
    batch = record_batch()
    P = ProduceRequest
    message = P[version](
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            P.TopicProduceData(
                name="events",
                partition_data=[P.TopicProduceData.PartitionProduceData(index=3, records=batch)],
            )
        ],
    )
    request = decode_one(kp_frame(message))
    body = request.body
    assert body.acks == -1 and body.timeout == timedelta(seconds=30)
    partition = body.topic_data[0].partition_data[0]
    assert body.topic_data[0].name == "events" and partition.index == 3
    assert bytes(partition.records) == batch


@pytest.mark.parametrize("version", range(4, 12))
def test_fetch(version: int) -> None:
    F = FetchRequest
    part: dict[str, Any] = {"partition": 0, "fetch_offset": 42, "partition_max_bytes": 1 << 20}
    if version >= 9:
        part["current_leader_epoch"] = -1
    if version >= 5:
        part["log_start_offset"] = -1
    kwargs: dict[str, Any] = {
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 50 << 20,
        "isolation_level": 1,
        "topics": [F.FetchTopic(topic="events", partitions=[F.FetchTopic.FetchPartition(**part)])],
    }
    if version >= 7:
        kwargs.update(session_id=0, session_epoch=-1, forgotten_topics_data=[])
    if version >= 11:
        kwargs["rack_id"] = ""
    request = decode_one(kp_frame(F[version](**kwargs)))
    body = request.body
    assert body.isolation_level == 1
    assert body.max_wait == timedelta(milliseconds=500)
    partition = body.topics[0].partitions[0]
    assert body.topics[0].topic == "events"
    assert (partition.partition, partition.fetch_offset) == (0, 42)


@pytest.mark.parametrize("version", range(1, 6))
def test_list_offsets(version: int) -> None:
    L = ListOffsetsRequest
    part: dict[str, Any] = {"partition_index": 2, "timestamp": -2}
    if version >= 4:
        part["current_leader_epoch"] = -1
    kwargs: dict[str, Any] = {
        "replica_id": -1,
        "topics": [
            L.ListOffsetsTopic(
                name="events", partitions=[L.ListOffsetsTopic.ListOffsetsPartition(**part)]
            )
        ],  # noqa: E501
    }
    if version >= 2:
        kwargs["isolation_level"] = 1
    request = decode_one(kp_frame(L[version](**kwargs)))
    partition = request.body.topics[0].partitions[0]
    assert (partition.partition_index, partition.timestamp) == (2, -2)


def test_group_and_admin_apis() -> None:
    find = decode_one(kp_frame(FindCoordinatorRequest[2](key="g1", key_type=0)))
    assert find.body.key == "g1"

    J = JoinGroupRequest
    join = decode_one(
        kp_frame(
            J[5](
                group_id="g1",
                session_timeout_ms=10000,
                rebalance_timeout_ms=30000,
                member_id="",
                group_instance_id=None,
                protocol_type="consumer",
                protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01")],
            )
        )
    )
    assert join.body.group_id == "g1" and join.body.protocols[0].metadata == b"\x00\x01"

    sync = decode_one(
        kp_frame(SyncGroupRequest[3](group_id="g1", generation_id=1, member_id="m",
                                     group_instance_id=None, assignments=[]))
    )  # fmt: skip
    assert sync.body.generation_id == 1

    beat = decode_one(
        kp_frame(HeartbeatRequest[3](group_id="g1", generation_id=1, member_id="m",
                                     group_instance_id=None))
    )  # fmt: skip
    assert beat.body.member_id == "m"

    O = OffsetCommitRequest  # noqa: E741
    commit = decode_one(
        kp_frame(
            O[7](
                group_id="g1",
                generation_id_or_member_epoch=1,
                member_id="m",
                group_instance_id=None,
                topics=[
                    O.OffsetCommitRequestTopic(
                        name="events",
                        partitions=[
                            O.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                                partition_index=0,
                                committed_offset=99,
                                committed_leader_epoch=-1,
                                committed_metadata="",
                            )
                        ],
                    )
                ],
            )
        )
    )
    assert commit.body.topics[0].partitions[0].committed_offset == 99

    OF = OffsetFetchRequest
    fetch = decode_one(
        kp_frame(
            OF[5](
                group_id="g1",
                topics=[OF.OffsetFetchRequestTopic(name="events", partition_indexes=[0, 1])],
            )
        )  # noqa: E501
    )
    assert fetch.body.topics[0].partition_indexes == (0, 1)

    init = decode_one(
        kp_frame(InitProducerIdRequest[1](transactional_id=None, transaction_timeout_ms=60000))
    )  # noqa: E501
    assert init.body.transactional_id is None

    C = CreateTopicsRequest
    create = decode_one(
        kp_frame(
            C[4](
                topics=[C.CreatableTopic(name="new", num_partitions=-1, replication_factor=-1,
                                         assignments=[], configs=[])],
                timeout_ms=5000,
                validate_only=False,
            )
        )
    )  # fmt: skip
    assert create.body.topics[0].name == "new" and create.body.topics[0].num_partitions == -1


# ---------------------------------------------------------------------------------------------
# librdkafka (confluent-kafka) on a real socket
# ---------------------------------------------------------------------------------------------


def _serve_librdkafka(listener: socket.socket, seen: list[Request], errors: list[str]) -> None:
    """Answer librdkafka's ApiVersions, record what it asks next; stop after Metadata."""
    conn, _ = listener.accept()
    conn.settimeout(10)
    decoder = FrameDecoder()
    deadline = time.monotonic() + 15
    try:
        while time.monotonic() < deadline:
            data = conn.recv(65536)
            if not data:
                return
            decoder.receive_data(data)
            while (frame := decoder.next_frame()) is not NEED_DATA:
                assert isinstance(frame, bytes)
                try:
                    request = decode_request(frame)
                except UnsupportedVersion as exc:
                    errors.append(f"unsupported {exc.api_key} v{exc.api_version}")
                    conn.sendall(encode_unsupported_version(exc))
                    continue
                seen.append(request)
                if request.api_key == 18:
                    body = apis.response_type(18, request.api_version)(
                        error_code=ErrorCode.none,
                        api_keys=apis.supported_api_versions(request.api_version),
                        throttle_time=timedelta(0),
                    )
                    conn.sendall(encode_response(request.header, body))
                else:
                    return  # the first request after the handshake is enough
    finally:
        conn.close()


def test_librdkafka_handshake_over_a_socket() -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(15)
    port = listener.getsockname()[1]
    seen: list[Request] = []
    errors: list[str] = []
    server = threading.Thread(target=_serve_librdkafka, args=(listener, seen, errors))
    server.start()
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "client.id": "rdkafka-test",
            "socket.timeout.ms": 5000,
            "reconnect.backoff.max.ms": 1000,
            "log_level": 0,
        }
    )
    try:
        deadline = time.monotonic() + 15
        while server.is_alive() and time.monotonic() < deadline:
            producer.poll(0.05)
        server.join(timeout=1)
    finally:
        listener.close()
        del producer
    assert seen, f"no request decoded (errors: {errors})"
    first = seen[0]
    assert first.api_key == 18
    # librdkafka sends ApiVersions v3 first, with the flexible request header v2.
    assert first.api_version == 3
    assert first.header.header_version == 2
    assert first.header.client_id == "rdkafka-test"
    assert first.body.client_software_name == "confluent-kafka-python"
    # After our answer it goes on with Metadata (a version within our range).
    assert len(seen) >= 2 and seen[1].api_key == 3, (seen, errors)


def test_the_versions_kafka_python_pinned_to_2_5_to_2_8_sends() -> None:
    # Encoded by kafka-python, as a client pinned to 2.5-2.8 sends them unnegotiated.
    offsets = decode_one(kp_frame(OffsetFetchRequest[7](
        group_id="g1", require_stable=True,
        topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 2])],
    )))  # fmt: skip
    assert (offsets.api_version, offsets.body.require_stable) == (7, True)
    assert list(offsets.body.topics[0].partition_indexes) == [0, 2]

    J = JoinGroupRequest
    join = decode_one(kp_frame(J[7](
        group_id="g1", session_timeout_ms=10000, rebalance_timeout_ms=30000, member_id="",
        group_instance_id=None, protocol_type="consumer",
        protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01")],
    )))  # fmt: skip
    assert (join.api_version, join.body.protocol_type) == (7, "consumer")

    sync = decode_one(kp_frame(SyncGroupRequest[5](
        group_id="g1", generation_id=1, member_id="m", group_instance_id=None,
        protocol_type="consumer", protocol_name="range", assignments=[],
    )))  # fmt: skip
    assert (sync.body.protocol_type, sync.body.protocol_name) == ("consumer", "range")

    acls = decode_one(kp_frame(DescribeAclsRequest[2](
        resource_type_filter=2, resource_name_filter="t", pattern_type_filter=3,
        principal_filter=None, host_filter=None, operation=1, permission_type=1,
    )))  # fmt: skip
    assert (acls.api_version, acls.body.resource_name_filter) == (2, "t")

    E = OffsetForLeaderEpochRequest
    epochs = decode_one(kp_frame(E[4](replica_id=-1, topics=[E.OffsetForLeaderTopic(
        topic="t", partitions=[E.OffsetForLeaderTopic.OffsetForLeaderPartition(
            partition=1, current_leader_epoch=3, leader_epoch=2)],
    )])))  # fmt: skip
    (partition,) = epochs.body.topics[0].partitions
    assert (epochs.api_version, partition.partition, partition.leader_epoch) == (4, 1, 2)

    C = CreateTopicsRequest
    create = decode_one(kp_frame(C[6](timeout_ms=5000, validate_only=False, topics=[
        C.CreatableTopic(name="t", num_partitions=3, replication_factor=1, assignments=[],
                         configs=[]),
    ])))  # fmt: skip
    assert (create.api_version, create.body.topics[0].num_partitions) == (6, 3)
    delete = decode_one(kp_frame(DeleteTopicsRequest[5](timeout_ms=5000, topic_names=["t"])))
    assert (delete.api_version, list(delete.body.topic_names)) == (5, ["t"])
