"""Helpers for the ZooKeeper-consumer tests: a broker subprocess, a collector, a child consumer.

* :class:`Broker` is a :class:`~sluice.testing.broker.BrokerProcess` whose new topics get four
  partitions, with a helper to produce strings round-robin over partitions.
* :class:`Collector` reads every stream of a connector on its own thread and records
  ``(topic, partition, offset, value)`` of each message, until the connector shuts down.
* Run as ``python -m tests.pipeline.zk_broker_fixture '<json config>' <topic> [options]``
  this module is a consumer process: it prints ``<partition> <offset>`` per message (flushed),
  commits every ``--commit-every`` messages, sleeps ``--delay-ms`` after each, and after
  ``--stop-after`` messages shuts down cleanly and exits 0; otherwise it runs until killed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType

from confluent_kafka import Producer

from sluice.pipeline.consumer.connector import (
    KafkaStream,
    MessageAndMetadata,
    ZookeeperConsumerConnector,
)
from sluice.testing.broker import BrokerProcess
from sluice.testing.net import wait_until as wait_until  # the tests import it from here

REPO = Path(__file__).resolve().parents[2]


class Broker(BrokerProcess):
    """A standalone broker for the ZooKeeper-consumer tests: ``num.partitions=4``."""

    def __init__(self, base_dir: Path) -> None:
        super().__init__(base_dir, {"num.partitions": "4"})

    def produce(self, topic: str, values: Iterable[str], partitions: int) -> None:
        """Produce each value to partition ``index % partitions``, and wait for the acks."""
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "acks": "all"})
        failures: list[str] = []

        def delivered(err: object, _msg: object) -> None:
            if err is not None:
                failures.append(str(err))

        for index, value in enumerate(values):
            producer.produce(
                topic,
                value=value.encode(),
                key=value.encode(),
                partition=index % partitions,
                on_delivery=delivered,
            )
        assert producer.flush(30) == 0, "messages still unsent after 30 s"
        assert not failures, failures


Record = tuple[str, int, int, str]  # topic, partition, offset, value


class Collector:
    """Reads all streams of a connector, one thread each, into :attr:`records`."""

    def __init__(
        self,
        connector: ZookeeperConsumerConnector,
        streams: Iterable[KafkaStream],
        on_message: Callable[[MessageAndMetadata], None] | None = None,
    ) -> None:
        self.connector = connector
        self.records: list[Record] = []
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._on_message = on_message
        self._threads = [
            threading.Thread(target=self._read, args=(s,), name=f"collect-{s!r}", daemon=True)
            for s in streams
        ]
        for thread in self._threads:
            thread.start()

    def _read(self, stream: KafkaStream) -> None:
        try:
            for message in stream:
                assert message.value is not None
                with self._lock:
                    self.records.append(
                        (message.topic, message.partition, message.offset, message.value.decode())
                    )
                if self._on_message is not None:
                    self._on_message(message)
        except BaseException as e:  # reported by stop(), not as an unhandled-thread warning
            self.errors.append(e)

    def count(self) -> int:
        with self._lock:
            return len(self.records)

    def stop(self) -> None:
        """Shut the connector down (streams end) and join the reader threads."""
        self.connector.shutdown()
        for thread in self._threads:
            thread.join(10)
            assert not thread.is_alive(), f"{thread.name} did not end after shutdown"
        assert not self.errors, self.errors

    def __enter__(self) -> Collector:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def counts(collectors: Iterable[Collector]) -> Counter[tuple[int, int]]:
    """How many times each (partition, offset) was delivered, over all collectors."""
    total: Counter[tuple[int, int]] = Counter()
    for collector in collectors:
        with collector._lock:
            total.update((p, o) for _, p, o, _ in collector.records)
    return total


# --------------------------------------------------------------------------------------------
# A consumer in its own process
# --------------------------------------------------------------------------------------------


def child_command(config: dict[str, str], topic: str, *options: str) -> list[str]:
    module = "tests.pipeline.zk_broker_fixture"
    return [sys.executable, "-m", module, json.dumps(config), topic, *options]


def start_child(config: dict[str, str], topic: str, *options: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        child_command(config, topic, *options),
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def child_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("topic")
    parser.add_argument("--stop-after", type=int, default=0)
    parser.add_argument("--commit-every", type=int, default=0)
    parser.add_argument("--delay-ms", type=int, default=0)
    args = parser.parse_args(argv)
    connector = ZookeeperConsumerConnector(json.loads(args.config))
    try:
        [stream] = connector.create_message_streams(args.topic, 1)
        print("ready", flush=True)
        for n, message in enumerate(stream, start=1):
            print(message.partition, message.offset, flush=True)
            if args.commit_every and n % args.commit_every == 0:
                connector.commit_offsets()
            if args.stop_after and n >= args.stop_after:
                break
            time.sleep(args.delay_ms / 1000)
    finally:
        connector.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
