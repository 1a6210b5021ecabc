"""The Prometheus endpoint (``metrics.listener``): per-topic counters move by exactly what
the clients did, and the per-partition gauges read the logs at scrape time."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sluice.broker.log.records import encode_batch
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.clients import Msg, consume, produce, unique
from tests.broker.server.wire import WireClient

pytestmark = pytest.mark.broker


def scrape(broker: BrokerProcess) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample the endpoint serves, by (name, labels)."""
    url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        text = response.read().decode("utf-8")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str,
          **labels: str) -> float:  # fmt: skip
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_counters_follow_produce_and_fetch(broker: BrokerProcess) -> None:
    topic = unique("metrics")
    create_topic(broker.bootstrap, topic, partitions=2)
    before = scrape(broker)
    produce(broker.bootstrap, topic, [Msg(b"k", b"v" * 100)] * 25, partition=0)
    produce(broker.bootstrap, topic, [Msg(None, b"w" * 10)] * 12, partition=1)
    after_produce = scrape(broker)
    assert value(after_produce, "sluice_messages_in_total", topic=topic) == 37
    bytes_in = value(after_produce, "sluice_bytes_in_total", topic=topic)
    assert bytes_in > 25 * 100 + 12 * 10  # record bytes plus batch headers
    assert value(after_produce, "sluice_log_end_offset", topic=topic, partition="0") == 25
    assert value(after_produce, "sluice_log_end_offset", topic=topic, partition="1") == 12
    sizes = [value(after_produce, "sluice_log_size_bytes", topic=topic, partition=p) for p in "01"]
    assert sum(sizes) == bytes_in  # the broker stores the batches as they came
    produced = value(after_produce, "sluice_requests_total", api="produce") - value(
        before, "sluice_requests_total", api="produce"
    )
    assert produced >= 2
    assert value(after_produce, "sluice_request_seconds_count", api="produce") >= produced

    consume(broker.bootstrap, topic, {0: 25, 1: 12})
    after_fetch = scrape(broker)
    assert value(after_fetch, "sluice_bytes_out_total", topic=topic) >= bytes_in
    assert value(after_fetch, "sluice_requests_total", api="fetch") > value(
        before, "sluice_requests_total", api="fetch"
    )


def test_idempotent_duplicate_is_not_counted_twice(broker: BrokerProcess) -> None:
    topic = unique("metrics-dup")
    create_topic(broker.bootstrap, topic)
    with WireClient(broker.port) as wire:
        pid, epoch = wire.init_producer_id()
        batch = encode_batch(
            [(b"k", b"v")] * 4, producer_id=pid, producer_epoch=epoch, base_sequence=0
        )
        assert wire.produce(topic, 0, batch).base_offset == 0
        assert wire.produce(topic, 0, batch).base_offset == 0  # a retry
    samples = scrape(broker)
    assert value(samples, "sluice_messages_in_total", topic=topic) == 4
    assert value(samples, "sluice_bytes_in_total", topic=topic) == len(batch)
