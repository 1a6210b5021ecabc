"""Seed requests for the fuzz test: one well-formed request of every API at every version the
broker implements, plus requests encoded by another implementation (kafka-python's encoders).

Each API is described once by a superset of its fields' values; ``sluice.broker.protocol.build``
keeps the fields each version has. Produce carries real record batches (uncompressed, gzip,
zstd, idempotent). Every seed names only ``FUZZ_TOPIC`` (or topics made up for it), never a
topic another test reads, so what a surviving mutation writes or deletes harms nothing.
"""

from __future__ import annotations

import uuid
import warnings
from typing import Any

from sluice.broker.log.records import GZIP, NONE, ZSTD, encode_batch
from sluice.broker.protocol import APIS, ApiKey
from tests.broker.server.wire import frame_of, request

FUZZ_TOPIC = "fuzz-target"


def _batches() -> list[bytes]:
    records = [(b"key-%d" % i, b"value-%d" % i * 5, [("h", b"x")]) for i in range(8)]
    stamps = [1_700_000_000_000 + i for i in range(8)]
    return [
        encode_batch(records, timestamps=stamps, codec=NONE),
        encode_batch(records, timestamps=stamps, codec=GZIP),
        encode_batch(records, timestamps=stamps, codec=ZSTD),
        encode_batch(records, timestamps=stamps, producer_id=900, producer_epoch=0,
                     base_sequence=0),
    ]  # fmt: skip


def _fetch_topic(topic: str) -> dict[str, Any]:
    return {
        "topic": topic,
        "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20},
        ],
    }  # fmt: skip


def _values(batch: bytes) -> dict[int, dict[str, Any]]:
    """A superset of each API's field values (the version's own fields are kept)."""
    partitions = [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2,
                   "max_num_offsets": 1}]  # fmt: skip
    return {
        ApiKey.API_VERSIONS: {"client_software_name": "sluice-fuzz",
                              "client_software_version": "1.0"},
        # v10+ names the topic's id beside its name (the zero id: asked by name).
        ApiKey.METADATA: {"topics": [{"name": FUZZ_TOPIC, "topic_id": uuid.UUID(int=0)}],
                          "allow_auto_topic_creation": True,
                          "include_cluster_authorized_operations": False,
                          "include_topic_authorized_operations": False},
        ApiKey.PRODUCE: {"acks": -1, "timeout": 5000, "transactional_id": None,
                         "topic_data": [{"name": FUZZ_TOPIC,
                                         "partition_data": [{"index": 0, "records": batch}]}]},
        ApiKey.FETCH: {"replica_id": -1, "max_wait": 50, "min_bytes": 1, "max_bytes": 1 << 20,
                       "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                       "topics": [_fetch_topic(FUZZ_TOPIC)], "forgotten_topics_data": [],
                       "rack_id": ""},
        ApiKey.LIST_OFFSETS: {"replica_id": -1, "isolation_level": 0,
                              "topics": [{"name": FUZZ_TOPIC, "partitions": partitions}]},
        ApiKey.OFFSET_COMMIT: {"group_id": "fuzz-group", "generation_id_or_member_epoch": -1,
                               "member_id": "", "group_instance_id": None,
                               "retention_time": -1,
                               "topics": [{"name": FUZZ_TOPIC, "partitions": [
                                   {"partition_index": 0, "committed_offset": 3,
                                    "committed_leader_epoch": -1,
                                    "committed_metadata": "m"}]}]},
        ApiKey.OFFSET_FETCH: {"group_id": "fuzz-group", "require_stable": False,
                              "topics": [{"name": FUZZ_TOPIC, "partition_indexes": [0]}]},
        ApiKey.FIND_COORDINATOR: {"key": "fuzz-group", "key_type": 0},
        ApiKey.CREATE_TOPICS: {"timeout": 5000, "validate_only": False,
                               "topics": [{"name": "fuzz-created", "num_partitions": 2,
                                           "replication_factor": 1, "assignments": [],
                                           "configs": [{"name": "retention.ms",
                                                        "value": "60000"}]}]},
        # v0-5 by name; v6 (KIP-516) each by name or id.
        ApiKey.DELETE_TOPICS: {"timeout": 5000, "topic_names": ["fuzz-deleted"],
                               "topics": [{"name": "fuzz-deleted", "topic_id": None}]},
        ApiKey.INIT_PRODUCER_ID: {"transactional_id": None, "transaction_timeout": 60_000},
    }  # fmt: skip


def kio_seeds() -> list[bytes]:
    """Every implemented (API, version) that the broker handles, encoded by Sluice's codec."""
    seeds = []
    for i, batch in enumerate(_batches()):
        for key, values in _values(batch).items():
            if i and key != ApiKey.PRODUCE:
                continue  # the other batches matter to Produce only
            for version in APIS[key].versions:
                seeds.append(frame_of(request(key, version, values), correlation_id=version))
    return seeds


def kafka_python_seeds() -> list[bytes]:
    """A few requests framed by kafka-python's own encoders (another implementation's
    bytes); empty if kafka-python is not installed."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
            from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
            from kafka.protocol.producer import ProduceRequest
    except ImportError:
        return []

    def frame(message: Any) -> bytes:
        message.with_header(correlation_id=7, client_id="kafka-python-fuzz")
        return bytes(message.encode(framed=True, header=True))

    batch = _batches()[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        P, F, L, M = ProduceRequest, FetchRequest, ListOffsetsRequest, MetadataRequest
        fetch_partition = F.FetchTopic.FetchPartition(
            partition=0,
            current_leader_epoch=-1,
            fetch_offset=0,
            log_start_offset=-1,
            partition_max_bytes=1 << 20,
        )
        list_partition = L.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=-1
        )
        return [
            frame(ApiVersionsRequest[3](client_software_name="kp", client_software_version="3")),
            frame(M[8](topics=[M.MetadataRequestTopic(name=FUZZ_TOPIC)],
                       allow_auto_topic_creation=True)),
            frame(P[8](transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
                P.TopicProduceData(name=FUZZ_TOPIC, partition_data=[
                    P.TopicProduceData.PartitionProduceData(index=0, records=batch)])])),
            frame(F[11](replica_id=-1, max_wait_ms=50, min_bytes=1, max_bytes=1 << 20,
                        isolation_level=0, session_id=0, session_epoch=-1,
                        topics=[F.FetchTopic(topic=FUZZ_TOPIC, partitions=[fetch_partition])],
                        forgotten_topics_data=[], rack_id="")),
            frame(L[5](replica_id=-1, isolation_level=0, topics=[
                L.ListOffsetsTopic(name=FUZZ_TOPIC, partitions=[list_partition])])),
        ]  # fmt: skip


def all_seeds() -> list[bytes]:
    return kio_seeds() + kafka_python_seeds()
