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
from typing import TYPE_CHECKING, Any

from broker.log.errors import InvalidRecordError, StorageError
from broker.log.log import Log
from broker.log.record_batch import peek_size
from broker.log.topic_partition import TopicPartition
from broker.protocol import Request
from broker.server import error_codes as ec
from broker.server.responses import respond

if TYPE_CHECKING:
    from broker.server.broker import Broker

log = logging.getLogger(__name__)


def _partition_result(partition: int, error_code: int = ec.NONE) -> dict[str, Any]:
    """A partition's answer with every field of every version (``build`` drops the extra)."""
    return {
        "index": partition,
        "error_code": error_code,
        "base_offset": -1,
        "log_append_time": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": None,
    }


def _append(broker: Broker, topic: str, partition: int, records: bytes | None) -> dict[str, Any]:
    result = _partition_result(partition)
    partition_log = broker.log_for(topic, partition)
    if partition_log is None:
        result["error_code"] = ec.UNKNOWN_TOPIC_OR_PARTITION
        return result
    try:
        if not records:
            raise InvalidRecordError("expected one record batch, found no records")
        if peek_size(records) != len(records):
            raise InvalidRecordError(
                f"expected exactly one record batch of {len(records)} bytes, "
                f"found one of {peek_size(records)} bytes"
            )
        info = partition_log.append(records, leader_epoch=0)
    except StorageError as exc:
        result["error_code"] = ec.code_for(exc)
        result["error_message"] = str(exc)
        log.info("produce to %s-%d refused: %s", topic, partition, exc)
        return result
    result["base_offset"] = info.first_offset
    result["log_append_time"] = info.log_append_time
    result["log_start_offset"] = info.log_start_offset
    if not info.duplicate:
        broker.metrics.bytes_in.labels(topic).inc(info.size)
        broker.metrics.messages_in.labels(topic).inc(info.record_count)
        broker.notify_append(TopicPartition(topic, partition))
    return result


async def handle_produce(broker: Broker, request: Request) -> bytes | None:
    body = request.body
    acks = body.acks
    responses = []
    to_flush: set[Log] = set()
    for topic_data in body.topic_data:
        partitions = []
        for pd in topic_data.partition_data:
            if acks not in (0, 1, -1):
                partitions.append(_partition_result(pd.index, ec.INVALID_REQUIRED_ACKS))
                continue
            result = _append(broker, topic_data.name, pd.index, pd.records)
            partitions.append(result)
            partition_log = broker.log_manager.get_log(topic_data.name, pd.index)
            if result["error_code"] == ec.NONE and partition_log and partition_log.needs_flush():
                to_flush.add(partition_log)
        responses.append({"name": topic_data.name, "partition_responses": partitions})
    if acks == 0:
        return None
    if to_flush:
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(None, lg.flush) for lg in to_flush))
    return respond(request, {"responses": responses, "throttle_time": 0})


async def handle_init_producer_id(broker: Broker, request: Request) -> bytes:
    body = request.body
    if body.transactional_id is not None:
        # Transactions (AddPartitionsToTxn, EndTxn, markers) are not implemented.
        return respond(
            request,
            {"throttle_time": 0, "error_code": ec.INVALID_REQUEST, "producer_id": -1,
             "producer_epoch": -1},
        )  # fmt: skip
    producer_id = broker.metadata.next_producer_id()
    return respond(
        request,
        {"throttle_time": 0, "error_code": ec.NONE, "producer_id": producer_id,
         "producer_epoch": 0},
    )  # fmt: skip
