"""Transactional produce throughput at 1, 10 and 100 batches per transaction, against the
idempotent producer, on a standalone broker started for the run.

    .venv/bin/python -m tests.broker.server.bench_transactions [BATCHES] [RECORDS]

Each batch is RECORDS (default 100) records of 100 bytes sent to one partition and flushed
(so it is one Produce request, one record batch); BATCHES (default 300) batches per run.
A transactional run wraps every 1, 10 or 100 batches in begin/commit (InitProducerId once;
AddPartitionsToTxn, EndTxn and a marker per transaction). An untimed idempotent run warms the
broker first. Not a pytest module.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from sluice.testing.broker import BrokerProcess, create_topic


def run(bootstrap: str, topic: str, batches: int, records: int, per_txn: int | None) -> float:
    """Records per second; ``per_txn`` None: idempotent, no transactions."""
    config = {"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True}
    if per_txn is not None:
        config["transactional.id"] = f"bench-{topic}"
    producer = Producer(config)
    if per_txn is not None:
        producer.init_transactions(30)
    value = b"x" * 100
    started = time.perf_counter()
    for i in range(batches):
        if per_txn is not None and i % per_txn == 0:
            producer.begin_transaction()
        for _ in range(records):
            producer.produce(topic, value=value, partition=0)
        producer.flush(30)
        if per_txn is not None and (i + 1) % per_txn == 0:
            producer.commit_transaction(30)
    if per_txn is not None and batches % per_txn:
        producer.commit_transaction(30)
    elapsed = time.perf_counter() - started
    return batches * records / elapsed


def main(batches: int = 300, records: int = 100) -> None:
    broker = BrokerProcess(Path(tempfile.mkdtemp(prefix="bench-txn-")), log_level="warning")
    broker.start()
    try:
        create_topic(broker.bootstrap, "bench-warmup")
        run(broker.bootstrap, "bench-warmup", batches, records, None)  # connections, caches
        results = []
        for name, per_txn in (("idempotent", None), ("txn x1", 1), ("txn x10", 10),
                              ("txn x100", 100)):  # fmt: skip
            topic = f"bench-{name.replace(' ', '-')}"
            create_topic(broker.bootstrap, topic)
            rate = run(broker.bootstrap, topic, batches, records, per_txn)
            results.append((name, rate))
            print(f"{name:12s} {rate:10.0f} records/s  {rate / records:8.1f} batches/s")
        base = results[0][1]
        for name, rate in results[1:]:
            print(f"{name:12s} {rate / base:6.2f}x the idempotent producer")
    finally:
        broker.stop()


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
