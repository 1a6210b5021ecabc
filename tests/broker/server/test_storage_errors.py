"""A real broker whose log dir fills up: a small tmpfs as ``log.dirs``, filled by an acks=all
confluent-kafka producer.

The producer must see KAFKA_STORAGE_ERROR for the refused batches — never a dropped
connection (``_TRANSPORT``); the broker must log one line per event, not a traceback per
request; every acknowledged message must stay readable; freeing space must let producing
resume without a restart; and a kill -9 while the disk is full must lose nothing acknowledged.

Mounting a tmpfs needs root (CAP_SYS_ADMIN). Where that is missing the tests skip — except
under ``CI=true``, where they fail: CI runs as root, so a skip would hide a broken box.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from sluice.testing.broker import BrokerProcess
from sluice.testing.ci import in_ci

pytestmark = pytest.mark.slow

DISK_BYTES = 8 << 20
FILLER_BYTES = 3 << 20
VALUE_BYTES = 16 << 10
# The broker probes an offline dir every 5 s (LogManager's log_dir_retry_ms).
RECOVERY_TIMEOUT = 30.0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB tmpfs, unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        reason = f"cannot mount a tmpfs (root needed): {done.stderr.strip()}"
        if in_ci():
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def start(base: Path, disk: Path) -> BrokerProcess:
    broker = BrokerProcess(
        base,
        log_dir=disk / "logs",
        overrides={"log.segment.bytes": str(1 << 20), "auto.create.topics.enable": "false"},
    )
    return broker.start()


class Fill:
    """An acks=all producer that sends numbered messages until the broker refuses some."""

    def __init__(self, bootstrap: str) -> None:
        self.acked: list[int] = []
        self.errors: list[KafkaError] = []
        self.client_errors: list[KafkaError] = []
        self.next_id = 0
        # retries=0: each refusal reaches the delivery report as the broker's own code.
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "retries": 0,
                "linger.ms": 0,
                "message.timeout.ms": 20_000,
                "error_cb": self.client_errors.append,
            }
        )

    def _report(self, err: KafkaError | None, msg: object) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.acked.append(int(msg.value()[:10]))  # type: ignore[attr-defined]

    def send(self, topic: str, count: int) -> None:
        for _ in range(count):
            value = b"%010d" % self.next_id + b"." * (VALUE_BYTES - 10)
            self.next_id += 1
            self.producer.produce(topic, value, partition=0, on_delivery=self._report)
            self.producer.poll(0)
        assert self.producer.flush(30) == 0

    def until_refused(self, topic: str) -> None:
        for _ in range(DISK_BYTES // VALUE_BYTES):
            self.send(topic, 8)
            if self.errors:
                return
        pytest.fail(f"the disk never filled: {len(self.acked)} messages acknowledged")


def read_ids(bootstrap: str, topic: str) -> list[int]:
    """Every message id in partition 0, in order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": uuid.uuid4().hex,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        ids: list[int] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = consumer.poll(1.0)
            if m is None:
                continue
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    return ids
                raise AssertionError(f"consume failed: {err}")
            ids.append(int((m.value() or b"")[:10]))
        raise AssertionError(f"no end of partition within 60 s; {len(ids)} read")
    finally:
        consumer.close()


def assert_storage_errors_only(fill: Fill) -> None:
    codes = {e.code() for e in fill.errors}
    assert codes == {KafkaError.KAFKA_STORAGE_ERROR}, [str(e) for e in fill.errors]
    dropped = [str(e) for e in fill.client_errors if e.code() == KafkaError._TRANSPORT]
    assert not dropped, dropped


def assert_one_line_per_event(broker: BrokerProcess, offline_events: int) -> None:
    out = broker.output()
    assert "Traceback" not in out, broker.output_tail(80)
    assert out.count("is offline:") == offline_events, broker.output_tail(80)


def wait_for_acks(fill: Fill, topic: str, before: int) -> None:
    deadline = time.monotonic() + RECOVERY_TIMEOUT
    while len(fill.acked) == before:
        assert time.monotonic() < deadline, "producing did not resume after space was freed"
        fill.errors.clear()
        fill.send(topic, 1)
        time.sleep(0.5)


def test_a_full_disk_answers_storage_error_and_recovers_when_freed(tmp_path, small_disk):
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * FILLER_BYTES)
    broker = start(tmp_path / "broker", small_disk)
    try:
        broker.create_topic("full")
        fill = Fill(broker.bootstrap)
        fill.until_refused("full")
        fill.send("full", 16)  # more refusals while offline: no more lines
        assert_storage_errors_only(fill)
        assert_one_line_per_event(broker, 1)
        acked = sorted(fill.acked)
        assert acked, "nothing was acknowledged before the disk filled"
        ids = read_ids(broker.bootstrap, "full")
        assert sorted(set(ids)) == sorted(ids)  # no duplicates
        assert set(acked) <= set(ids)

        filler.unlink()
        wait_for_acks(fill, "full", len(fill.acked))
        assert "back online" in broker.output()
        assert set(fill.acked) <= set(read_ids(broker.bootstrap, "full"))
    finally:
        broker.stop()


def test_kill_9_while_full_loses_nothing_acknowledged(tmp_path, small_disk):
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * FILLER_BYTES)
    broker = start(tmp_path / "broker", small_disk)
    try:
        broker.create_topic("full")
        fill = Fill(broker.bootstrap)
        fill.until_refused("full")
        assert_storage_errors_only(fill)
        broker.restart(kill=True)  # still full: the restart must load and serve it
        ids = read_ids(broker.bootstrap, "full")
        assert set(fill.acked) <= set(ids)
        assert len(ids) == len(set(ids))

        filler.unlink()
        fill = Fill(broker.bootstrap)
        fill.next_id = 1_000_000
        wait_for_acks(fill, "full", 0)
        assert set(fill.acked) <= set(read_ids(broker.bootstrap, "full"))
    finally:
        broker.stop()
