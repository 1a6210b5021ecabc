"""Transactional produce throughput at 1, 10 and 100 batches per transaction against the
idempotent producer, on one standalone broker (``bench.bench_broker.start_broker``).

Every way writes the same bytes with the same client settings (confluent-kafka: ``acks=all``,
``enable.idempotence=true``, ``linger.ms=0``): ``batches`` batches (3,000 quick, 10,000 full) of
``RECORDS`` (100) records of ``VALUE`` (100) bytes to one partition, each batch produced and
then flushed, so that a batch is one Produce request and one record batch on the broker. The
transactional ways add ``transactional.id`` and wrap every 1, 10 or 100 batches in
``begin_transaction()`` … ``commit_transaction()``: per transaction one AddPartitionsToTxn,
one EndTxn, the coordinator's two ``__transaction_state`` writes (PrepareCommit,
CompleteCommit) and one commit marker in the partition. Outside the timed part: one untimed
warm-up run of every way (the broker's connections, the coordinator's partitions), and in every
run the producer's start — ``init_transactions()``, or the idempotent producer's own
InitProducerId, the topic's metadata and the connection — by one warm-up record (in a
transaction of its own for the transactional ways) produced and flushed before the clock
starts.

The ways take turns, ``REPEATS`` rounds, each run on a new topic; a row is the median of its
runs in records/s (and MB/s of values), and a ratio row divides each transactional run by the
idempotent run of the same round. The log of every topic is checked after its run: the high
watermark must be the records plus one marker per transaction.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from bench.bench_broker import load_average, start_broker
from bench.results import REPEATS, Results
from sluice.testing.broker import create_topic

RECORDS = 100  # records per batch
VALUE = 100  # bytes per record value
BATCHES = {True: 3_000, False: 10_000}  # quick, full
# (name in the results, slug in topic names and transactional ids, batches per transaction;
# None: no transactions)
WAYS: tuple[tuple[str, str, int | None], ...] = (
    ("idempotent", "idempotent", None),
    ("1 batch per transaction", "txn-1", 1),
    ("10 batches per transaction", "txn-10", 10),
    ("100 batches per transaction", "txn-100", 100),
)
SETTINGS: dict[str, Any] = {"acks": "all", "enable.idempotence": True, "linger.ms": 0}
TIMEOUT = 30.0


class OffsetsMismatchError(RuntimeError):
    """A topic's high watermark after a run is not the records plus one marker per
    transaction: the run did not write what it claims to have written."""


def transactions(batches: int, per_txn: int | None) -> int:
    """How many transactions ``batches`` batches make at ``per_txn`` batches each."""
    return 0 if per_txn is None else -(-batches // per_txn)


def produce(bootstrap: str, topic: str, batches: int, per_txn: int | None, slug: str) -> float:
    """Seconds to write ``batches`` batches to ``topic`` partition 0, each flushed; within
    transactions of ``per_txn`` batches (None: the idempotent producer alone)."""
    config = {"bootstrap.servers": bootstrap, **SETTINGS}
    if per_txn is not None:
        config["transactional.id"] = f"bench-{slug}"
    producer = Producer(config)
    if per_txn is not None:
        producer.init_transactions(TIMEOUT)
    value = b"x" * VALUE
    if per_txn is not None:
        producer.begin_transaction()
    producer.produce(topic, value=value, partition=0)  # the warm-up record (see the module)
    if producer.flush(TIMEOUT):
        raise TimeoutError(f"{topic}: expected the warm-up record acknowledged in {TIMEOUT:.0f} s")
    if per_txn is not None:
        producer.commit_transaction(TIMEOUT)
    started = time.perf_counter()
    for i in range(batches):
        if per_txn is not None and i % per_txn == 0:
            producer.begin_transaction()
        for _ in range(RECORDS):
            producer.produce(topic, value=value, partition=0)
        if producer.flush(TIMEOUT):
            raise TimeoutError(f"{topic}: expected every record acknowledged in {TIMEOUT:.0f} s")
        if per_txn is not None and ((i + 1) % per_txn == 0 or i + 1 == batches):
            producer.commit_transaction(TIMEOUT)
    return time.perf_counter() - started


def check_offsets(bootstrap: str, topic: str, batches: int, per_txn: int | None) -> None:
    """Raise :class:`OffsetsMismatchError` unless ``topic``'s end offset is every record plus
    one commit marker per transaction, the warm-up record and its transaction included."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-check"})
    try:
        _low, high = consumer.get_watermark_offsets(
            KafkaTopicPartition(topic, 0), timeout=TIMEOUT, cached=False
        )
    finally:
        consumer.close()
    records = batches * RECORDS + 1
    markers = 0 if per_txn is None else transactions(batches, per_txn) + 1
    if high != records + markers:
        raise OffsetsMismatchError(
            f"{topic}: expected end offset {records + markers:,} ({records:,} records and "
            f"{markers:,} markers), found {high:,}"
        )


def run(
    results: Results, quick: bool, *, batches: int | None = None, work_parent: Path = Path(".")
) -> None:
    """The rows of ``transactional_produce`` (see the module); ``batches`` overrides the
    mode's count, ``work_parent`` is where the broker's directory goes (removed at the end)."""
    batches = BATCHES[quick] if batches is None else batches
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-", dir=work_parent))
    broker = start_broker(work)
    seconds: dict[str, list[float]] = {name: [] for name, _, _ in WAYS}
    try:
        bootstrap = broker.bootstrap
        for _name, slug, per_txn in WAYS:  # connections, the coordinator's partitions, caches
            create_topic(bootstrap, f"bench-warmup-{slug}")
            produce(bootstrap, f"bench-warmup-{slug}", min(batches, 100), per_txn, slug)
        for repeat in range(REPEATS):
            for name, slug, per_txn in WAYS:
                topic = f"bench-{slug}-{repeat}"
                create_topic(bootstrap, topic)
                seconds[name].append(produce(bootstrap, topic, batches, per_txn, slug))
                check_offsets(bootstrap, topic, batches, per_txn)
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)

    exp = "transactional_produce"
    records = batches * RECORDS
    for name, _slug, per_txn in WAYS:
        rates = [records / s for s in seconds[name]]
        results.add_runs(exp, name, "records/s", rates, "records/s")
        results.add_runs(exp, name, "MB/s", [r * VALUE / 1e6 for r in rates], "MB/s")
        if per_txn is not None:
            ratios = [i / s for i, s in zip(seconds["idempotent"], seconds[name], strict=True)]
            results.add_runs(exp, f"{name}/idempotent", "records/s", ratios, "ratio")
    settings = ", ".join(f"{k}={v}" for k, v in SETTINGS.items())
    results.note(exp, f"{batches:,} batches of {RECORDS} records of {VALUE} B per run, each "
                 f"batch flushed (one Produce request); client `{settings}`; the ways took "
                 f"turns, {REPEATS} rounds, median [min .. max]; load average "
                 f"{load_average()}")  # fmt: skip
