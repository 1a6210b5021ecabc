"""Produce (v0–9). (InitProducerId, idempotent or transactional, is ``transactions``'.)

Each partition's records must be exactly one batch (Kafka's rule for Produce v3+; the codec
up-converts the message sets of v0–2 to one batch, see ``produce_codec``); the
partition's leader appends it through the replica manager, whose log validates it, checks
idempotence, assigns offsets and stamps the leader epoch without re-encoding. With
``acks=-1`` the answer waits until the ISR has the batch (at once on a standalone broker,
whose ISR is itself), so every partition of a request is appended first and then waited for
together. ``acks=0`` gets no response at all. When an append brings a log to
``flush.messages`` (or ``flush.ms`` is due) the response waits for that fsync, which runs in
the executor, not on the event loop — so with ``log.flush.interval.messages=1`` nothing
acknowledged can be lost even to a power cut.

Storage failures: a log whose append (or that fsync) fails on a full or failing disk undoes
it, marks its log dir offline and raises ``LogDirFailureError``; the partition answers
KAFKA_STORAGE_ERROR (retriable: the producer retries, and succeeds once the dir is back)
while the connection and the request's other partitions carry on. The log dir failure channel
logs the event once; refusals while the dir is offline log at DEBUG only.

Per-record errors (KIP-467): a batch for a compacted topic with records that have no key is
refused whole (INVALID_RECORD), and from v8 the answer names each such record in
``record_errors`` (its index in the batch and why) with ``error_message`` saying how many, as
Kafka's ``RecordValidationException`` answers: librdkafka then fails those messages with
INVALID_RECORD and the batch's others with ``_INVALID_DIFFERENT_RECORD``, so a producer can
resend the good ones. Such an answer is rare and is built through kio's ``ProduceResponse``
(``respond``) rather than the hand-written fast encoder, which writes empty record errors.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from sluice.broker.log.errors import (
    InvalidRecordError,
    LogDirFailureError,
    LogDirOfflineError,
    StorageError,
)
from sluice.broker.log.log import Log
from sluice.broker.log.record_batch import peek_size
from sluice.broker.log.record_filter import KeylessRecordsError, RecordError
from sluice.broker.protocol import Request
from sluice.broker.protocol.errors import Errors
from sluice.broker.protocol.produce_codec import PartitionResult, encode_produce_response
from sluice.broker.security.acl import AclOperation, ResourceType
from sluice.broker.server.authorization import allowed
from sluice.broker.server.context import BrokerContext
from sluice.broker.server.error_mapping import code_for
from sluice.broker.server.responses import respond

log = logging.getLogger(__name__)

VALID_ACKS = (0, 1, -1)


def _check_one_batch(records: bytes | bytearray | memoryview | None) -> None:
    if not records:
        raise InvalidRecordError("expected one record batch, found no records")
    size = peek_size(records)
    if size != len(records):
        raise InvalidRecordError(
            f"expected exactly one record batch of {len(records)} bytes, found one of {size} bytes"
        )


async def _append(
    ctx: BrokerContext, topic: str, partition: int, records: bytes | memoryview | None,
    acks: int, timeout_ms: int, to_flush: dict[Log, list[int]], slot: int,
    record_errors: dict[int, tuple[RecordError, ...]],
) -> PartitionResult:  # fmt: skip
    """Append one partition's batch as its leader; wait as ``acks`` asks. A batch refused
    record by record leaves its record errors in ``record_errors[slot]``."""
    if acks not in VALID_ACKS:
        return PartitionResult(partition, Errors.INVALID_REQUIRED_ACKS)
    try:
        leading, _ = ctx.replicas.leader_or_error(topic, partition)
        if leading is not None:  # append refuses the rest before it looks at the records
            _check_one_batch(records)
        result = await ctx.replicas.append(
            topic, partition, records or b"", acks=acks, timeout_ms=timeout_ms
        )
    except StorageError as exc:
        # A storage failure was logged once, as an event, by the log dir failure channel.
        quiet = isinstance(exc, (LogDirFailureError, LogDirOfflineError))
        log.log(logging.DEBUG if quiet else logging.INFO,
                "produce to %s-%d refused: %s", topic, partition, exc)  # fmt: skip
        if isinstance(exc, KeylessRecordsError):
            record_errors[slot] = exc.record_errors
        return PartitionResult(partition, code_for(exc), error_message=str(exc))
    info = result.info
    if result.error != Errors.NONE or info is None:
        return PartitionResult(partition, result.error, error_message=result.message)
    if not info.duplicate:
        # (The replica manager woke the partition's fetches as it appended, and again as the
        # high watermark moved: a notification here, after an acks=all wait, only marked every
        # partition of the request changed once more in the followers' fetch sessions, which
        # then read them all again to find nothing new.)
        ctx.metrics.record_append(topic, info.size, info.record_count)
    if leading is not None and leading.log.needs_flush():
        to_flush.setdefault(leading.log, []).append(slot)
    return PartitionResult(
        partition, Errors.NONE, info.first_offset, info.log_append_time, info.log_start_offset
    )


async def handle_produce(ctx: BrokerContext, request: Request) -> bytes | None:
    body = request.body
    acks = body.acks
    timeout_ms = body.timeout_ms  # the decoder keeps the wire integer (no timedelta per request)
    to_flush: dict[Log, list[int]] = {}  # log → the slots of ``results`` it answers
    record_errors: dict[int, tuple[RecordError, ...]] = {}  # slot → its refused records
    partitions = [(t.name, pd) for t in body.topic_data for pd in t.partition_data]
    refused = _refused(ctx, body)
    appends: list[Coroutine[Any, Any, PartitionResult]] = [
        _answer(PartitionResult(pd.index, refused[topic]))
        if topic in refused
        # A v0-2 message set the codec could not up-convert (a bad CRC: CORRUPT_MESSAGE).
        else _answer(PartitionResult(pd.index, code_for(pd.error), error_message=str(pd.error)))
        if pd.error is not None
        else _append(
            ctx, topic, pd.index, pd.records, acks, timeout_ms, to_flush, slot, record_errors
        )
        for slot, (topic, pd) in enumerate(partitions)
    ]
    # Every append starts (and, unless it waits for the ISR, ends) in request order: tasks
    # run in the order gathered, each up to its first wait, which follows its append.
    results = [await appends[0]] if len(appends) == 1 else await asyncio.gather(*appends)
    if acks == 0:
        return None
    if to_flush:
        await _flush(to_flush, results)
    topics: list[tuple[str, list[PartitionResult]]] = []
    done = iter(results)
    for topic_data in body.topic_data:
        topics.append((topic_data.name, [next(done) for _ in topic_data.partition_data]))
    if record_errors and request.api_version >= 8:
        return _respond_with_record_errors(request, topics, record_errors)
    return encode_produce_response(request.correlation_id, request.api_version, topics)


def _respond_with_record_errors(
    request: Request,
    topics: list[tuple[str, list[PartitionResult]]],
    record_errors: dict[int, tuple[RecordError, ...]],
) -> bytes:
    """The v8+ answer of a request with per-record errors (``record_errors``: slot in request
    order → that partition's refused records), through kio's ``ProduceResponse``."""
    slot = 0
    responses = []
    for name, partitions in topics:
        answers = []
        for result in partitions:
            answers.append({
                "index": result.index, "error_code": result.error_code,
                "base_offset": result.base_offset, "log_append_time": result.log_append_time,
                "log_start_offset": result.log_start_offset,
                "record_errors": [
                    {"batch_index": e.batch_index, "batch_index_error_message": e.message}
                    for e in record_errors.get(slot, ())
                ],
                "error_message": result.error_message,
            })  # fmt: skip
            slot += 1
        responses.append({"name": name, "partition_responses": answers})
    return respond(request, {"responses": responses, "throttle_time": 0})


def _refused(ctx: BrokerContext, body: Any) -> dict[str, Errors]:
    """The topics the principal may not write to, and the code each answers (KafkaApis: a
    transactional id without WRITE refuses every partition)."""
    if ctx.authorizer is None:
        return {}
    names = {t.name for t in body.topic_data}
    transactional_id = getattr(body, "transactional_id", None)
    if transactional_id is not None and not allowed(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        return dict.fromkeys(names, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    return {
        name: Errors.TOPIC_AUTHORIZATION_FAILED
        for name in names
        if not allowed(ctx, AclOperation.WRITE, ResourceType.TOPIC, name)
    }


async def _answer(result: PartitionResult) -> PartitionResult:
    return result


async def _flush(to_flush: dict[Log, list[int]], results: list[PartitionResult]) -> None:
    """fsync the logs ``to_flush`` in the executor; a partition whose log failed to flush
    answers KAFKA_STORAGE_ERROR instead of its offset (nothing unflushed is acknowledged)."""
    loop = asyncio.get_running_loop()
    logs = list(to_flush)
    done = await asyncio.gather(
        *(loop.run_in_executor(None, lg.flush) for lg in logs), return_exceptions=True
    )
    for lg, outcome in zip(logs, done, strict=True):
        if isinstance(outcome, StorageError):
            for slot in to_flush[lg]:
                results[slot] = PartitionResult(
                    results[slot].index, code_for(outcome), error_message=str(outcome)
                )
        elif isinstance(outcome, BaseException):
            raise outcome
