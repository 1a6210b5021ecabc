"""Produce (v3–8) and InitProducerId (v0–1).

Each partition's records must be exactly one batch (Kafka's rule for Produce v3+); the log
validates it, checks idempotence, assigns offsets and stamps the leader epoch without
re-encoding. ``acks=0`` gets no response at all. When an append brings a log to
``flush.messages`` (or ``flush.ms`` is due) the response waits for that fsync, which runs in
the executor, not on the event loop — so with ``log.flush.interval.messages=1`` nothing
acknowledged can be lost even to a power cut.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from sluice.broker.cluster.topic_metadata import MetadataUnavailableError
from sluice.broker.log.errors import InvalidRecordError, StorageError
from sluice.broker.log.log import AppendInfo, Log
from sluice.broker.log.record_batch import peek_size
from sluice.broker.protocol import Request
from sluice.broker.protocol.build import ms
from sluice.broker.protocol.produce_codec import PartitionResult, encode_produce_response
from sluice.broker.server import error_codes as ec
from sluice.broker.server.responses import respond
from sluice.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from sluice.broker.server.broker import Broker

log = logging.getLogger(__name__)


def _check_one_batch(records: bytes | bytearray | memoryview | None) -> None:
    if not records:
        raise InvalidRecordError("expected one record batch, found no records")
    size = peek_size(records)
    if size != len(records):
        raise InvalidRecordError(
            f"expected exactly one record batch of {len(records)} bytes, found one of {size} bytes"
        )


def _refused(partition: int, exc: Exception, topic: str) -> PartitionResult:
    log.info("produce to %s-%d refused: %s", topic, partition, exc)
    return PartitionResult(partition, ec.code_for(exc), error_message=str(exc))


def _accepted(broker: Broker, topic: str, partition: int, info: AppendInfo) -> PartitionResult:
    if not info.duplicate:
        broker.metrics.record_append(topic, info.size, info.record_count)
        broker.notify_append(TopicPartition(topic, partition))
    return PartitionResult(
        partition, ec.NONE, info.first_offset, info.log_append_time, info.log_start_offset
    )


def _append_standalone(
    broker: Broker, topic: str, partition: int, records: bytes | memoryview | None
) -> PartitionResult:
    partition_log = broker.log_for(topic, partition)
    if partition_log is None:
        return PartitionResult(partition, ec.UNKNOWN_TOPIC_OR_PARTITION)
    try:
        _check_one_batch(records)
        assert records is not None
        info = partition_log.append(records, leader_epoch=0)
    except StorageError as exc:
        return _refused(partition, exc, topic)
    return _accepted(broker, topic, partition, info)


async def _append_replicated(
    broker: Broker, topic: str, partition: int, records: bytes | memoryview | None, acks: int,
    timeout_ms: int,
) -> PartitionResult:  # fmt: skip
    assert broker.replicas is not None
    if broker.metadata.get(topic) is None:
        return PartitionResult(partition, ec.UNKNOWN_TOPIC_OR_PARTITION)
    try:
        _check_one_batch(records)
        assert records is not None
        result = await broker.replicas.append(
            topic, partition, records, acks=acks, timeout_ms=timeout_ms,
            min_insync_replicas=broker.min_insync_replicas(topic),
        )  # fmt: skip
    except StorageError as exc:
        return _refused(partition, exc, topic)
    if result.error != ec.NONE or result.info is None:
        return PartitionResult(partition, result.error, error_message=result.message)
    return _accepted(broker, topic, partition, result.info)


async def handle_produce(broker: Broker, request: Request) -> bytes | None:
    body = request.body
    acks = body.acks
    topics: list[tuple[str, list[PartitionResult]]] = []
    to_flush: set[Log] = set()
    if broker.replicas is not None:
        # Cluster mode: every partition's (possibly delayed, acks=-1) append at once.
        for topic_data in body.topic_data:
            results = await asyncio.gather(*(
                _append_replicated(broker, topic_data.name, pd.index, pd.records, acks,
                                   ms(body.timeout))
                if acks in (0, 1, -1)
                else _invalid_acks(pd.index)
                for pd in topic_data.partition_data
            ))  # fmt: skip
            topics.append((topic_data.name, list(results)))
    else:
        for topic_data in body.topic_data:
            partitions = []
            for pd in topic_data.partition_data:
                if acks not in (0, 1, -1):
                    partitions.append(PartitionResult(pd.index, ec.INVALID_REQUIRED_ACKS))
                    continue
                result = _append_standalone(broker, topic_data.name, pd.index, pd.records)
                partitions.append(result)
                if result.error_code == ec.NONE:
                    partition_log = broker.log_manager.get_log(topic_data.name, pd.index)
                    if partition_log is not None and partition_log.needs_flush():
                        to_flush.add(partition_log)
            topics.append((topic_data.name, partitions))
    if acks == 0:
        return None
    if to_flush:
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(None, lg.flush) for lg in to_flush))
    return encode_produce_response(request.correlation_id, request.api_version, topics)


async def _invalid_acks(partition: int) -> PartitionResult:
    return PartitionResult(partition, ec.INVALID_REQUIRED_ACKS)


async def handle_init_producer_id(broker: Broker, request: Request) -> bytes:
    body = request.body
    if body.transactional_id is not None:
        # Transactions (AddPartitionsToTxn, EndTxn, markers) are not implemented.
        return respond(
            request,
            {"throttle_time": 0, "error_code": ec.INVALID_REQUEST, "producer_id": -1,
             "producer_epoch": -1},
        )  # fmt: skip
    try:
        producer_id = await broker.off_loop(broker.metadata.next_producer_id)
    except MetadataUnavailableError:
        return respond(
            request,
            {"throttle_time": 0, "error_code": ec.COORDINATOR_NOT_AVAILABLE, "producer_id": -1,
             "producer_epoch": -1},
        )  # fmt: skip
    return respond(
        request,
        {"throttle_time": 0, "error_code": ec.NONE, "producer_id": producer_id,
         "producer_epoch": 0},
    )  # fmt: skip
