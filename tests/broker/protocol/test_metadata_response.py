"""The hand-written Metadata response (v0-v12) against kio's encoding through ``respond`` (what
the handler answered before), byte for byte, and as kio decodes it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.broker.protocol import Request, decode_response
from sluice.broker.protocol.apis import APIS, ApiKey, request_header_version
from sluice.broker.protocol.errors import Errors, LocalProtocolError
from sluice.broker.protocol.headers import RequestHeader
from sluice.broker.protocol.metadata_response import (
    METADATA_RESPONSE_VERSIONS,
    NOT_REQUESTED,
    MetadataBroker,
    MetadataPartition,
    MetadataTopic,
    encode_metadata_response,
)
from sluice.broker.server.responses import respond

INT32 = st.integers(-(2**31), 2**31 - 1)
names = st.text(alphabet="abcXYZ09._-é数🙂", min_size=1, max_size=12)
nodes = st.lists(st.integers(-1, 5000), max_size=4)
brokers = st.lists(
    st.builds(
        MetadataBroker,
        st.integers(0, 5000),
        names,
        st.integers(0, 65535),
        st.one_of(st.none(), names),
    ),
    max_size=3,
)
partitions = st.lists(
    st.builds(
        MetadataPartition,
        st.integers(0, 2**31 - 1),
        st.integers(-1, 5000),
        st.sampled_from([Errors.NONE, Errors.LEADER_NOT_AVAILABLE]),
        st.integers(-1, 2**31 - 1),
        nodes,
        nodes,
        nodes,
    ),
    max_size=4,
)
topics = st.lists(
    st.builds(
        MetadataTopic,
        names,
        st.sampled_from(
            [Errors.NONE, Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.TOPIC_AUTHORIZATION_FAILED]
        ),
        st.one_of(st.none(), st.uuids()),
        st.booleans(),
        partitions,
        st.one_of(st.just(NOT_REQUESTED), INT32),
    ),
    max_size=4,
)


def _header(version: int, correlation_id: int) -> RequestHeader:
    """The header the handler sees: a v0 request is up-converted to v1 (``handler_min``)."""
    handled = max(version, APIS[ApiKey.METADATA].handler_min)
    return RequestHeader(
        ApiKey.METADATA,
        handled,
        correlation_id,
        "c",
        request_header_version(ApiKey.METADATA, version),
        wire_version=version if handled != version else None,
    )


def _values(
    throttle: int, brokers: list[MetadataBroker], cluster_id: str | None, controller_id: int,
    topics: list[MetadataTopic], cluster_ops: int,
) -> dict[str, Any]:  # fmt: skip
    """The dicts the handler built for ``respond`` before it encoded by hand."""
    return {
        "throttle_time": throttle,
        "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in brokers],
        "cluster_id": cluster_id,
        "controller_id": controller_id,
        "topics": [
            {"error_code": t.error_code, "name": t.name,
             "topic_id": t.topic_id if t.topic_id is not None else uuid.UUID(int=0),
             "is_internal": t.is_internal,
             "topic_authorized_operations": t.topic_authorized_operations,
             "partitions": [
                 {"error_code": p.error_code, "partition_index": p.partition_index,
                  "leader_id": p.leader_id, "leader_epoch": p.leader_epoch,
                  "replica_nodes": list(p.replica_nodes), "isr_nodes": list(p.isr_nodes),
                  "offline_replicas": list(p.offline_replicas)}
                 for p in t.partitions]}
            for t in topics],
        "cluster_authorized_operations": cluster_ops,
    }  # fmt: skip


def _kio(header: RequestHeader, values: dict[str, Any]) -> bytes:
    return respond(Request(header, None), values)


def _decoded(frame: bytes, version: int) -> tuple[int, list[Any]]:
    correlation_id, body = decode_response(frame[4:], ApiKey.METADATA, version)
    found = [
        (t.name, int(t.error_code), [(p.partition_index, p.leader_id, list(p.replica_nodes))
                                     for p in t.partitions])
        for t in body.topics
    ]  # fmt: skip
    return correlation_id, found


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(list(METADATA_RESPONSE_VERSIONS)),
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**31 - 1),
    brokers,
    st.one_of(st.none(), names),
    st.integers(-1, 5000),
    topics,
    st.one_of(st.just(NOT_REQUESTED), INT32),
)
def test_encode_matches_kio(
    version: int, correlation_id: int, throttle: int, broker_list: list[MetadataBroker],
    cluster_id: str | None, controller_id: int, topic_list: list[MetadataTopic], cluster_ops: int,
) -> None:  # fmt: skip
    header = _header(version, correlation_id)
    found = encode_metadata_response(
        header, broker_list, topic_list, cluster_id=cluster_id, controller_id=controller_id,
        throttle_time_ms=throttle, cluster_authorized_operations=cluster_ops,
    )  # fmt: skip
    values = _values(throttle, broker_list, cluster_id, controller_id, topic_list, cluster_ops)
    assert found == _kio(header, values)
    decoded_id, decoded = _decoded(found, version)
    assert decoded_id == correlation_id
    assert decoded == [
        (t.name, int(t.error_code), [(p.partition_index, p.leader_id, list(p.replica_nodes))
                                     for p in t.partitions])
        for t in topic_list
    ]  # fmt: skip


@pytest.mark.parametrize("version", list(METADATA_RESPONSE_VERSIONS))
def test_a_wide_cluster_matches_kio(version: int) -> None:
    # 200 topics of 4 partitions and one of 300 (counts past 127 take two bytes of uvarint in
    # the flexible versions), three brokers, a topic name past 127 bytes.
    broker_list = [MetadataBroker(n, "127.0.0.1", 9092 + n, f"rack-{n}") for n in range(3)]
    topic_list = [
        MetadataTopic(
            "t" * 200 if i == 0 else f"topic-é-{i}", Errors.NONE, uuid.uuid4(), False,
            [MetadataPartition(p, p % 3, Errors.NONE, 5, [0, 1, 2], [p % 3, 1], [2])
             for p in range(4)],
        )
        for i in range(200)
    ]  # fmt: skip
    topic_list.append(
        MetadataTopic("many", partitions=[MetadataPartition(p, 0) for p in range(300)])
    )
    header = _header(version, 9)
    found = encode_metadata_response(
        header, broker_list, topic_list, cluster_id="cluster", controller_id=1
    )
    assert found == _kio(header, _values(0, broker_list, "cluster", 1, topic_list, NOT_REQUESTED))


def test_a_null_topic_name_is_written_from_v12_and_refused_before() -> None:
    unknown = [MetadataTopic(None, Errors.UNKNOWN_TOPIC_ID, uuid.uuid4())]
    header = _header(12, 3)
    values = _values(0, [], None, -1, unknown, NOT_REQUESTED)
    assert encode_metadata_response(header, [], unknown) == _kio(header, values)
    with pytest.raises(LocalProtocolError, match="Metadata v11: a topic name is not nullable"):
        encode_metadata_response(_header(11, 3), [], unknown)


def test_another_api_or_version_is_refused() -> None:
    with pytest.raises(LocalProtocolError, match="handles Metadata v0-v12"):
        encode_metadata_response(RequestHeader(ApiKey.METADATA, 13, 1, None, 2), [], [])
    with pytest.raises(LocalProtocolError, match="handles Metadata v0-v12"):
        encode_metadata_response(RequestHeader(ApiKey.FETCH, 4, 1, None, 1), [], [])


def test_a_value_out_of_its_field_is_refused() -> None:
    out_of_range = [MetadataTopic("t", partitions=[MetadataPartition(2**31, 0)])]
    with pytest.raises(LocalProtocolError, match="cannot encode a Metadata v12 response"):
        encode_metadata_response(_header(12, 1), [], out_of_range)


def test_the_advertised_versions_are_the_encoder_s() -> None:
    spec = APIS[ApiKey.METADATA]
    assert range(spec.advertised_min, spec.advertised_max + 1) == METADATA_RESPONSE_VERSIONS
