"""The nightly load of a Protobuf topic and of a JSON Schema topic: typed columns land, in both
table formats, and the undecodable records land in the error table.

Each topic (two partitions) holds 300 orders written by confluent-kafka's own
``ProtobufSerializer`` / ``JSONSerializer`` through Sluice's registry — a nested message /
object, repeated ones, a map, a timestamp, an optional field — and the undecodable values of
``tests.pipeline.source.typed_values`` among them. The model is what was produced: every order
is in the table once, at its partition and offset, with the values it was serialized from;
every bad value is in the error table with the error expected; the run's report names the
reader schema's type.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sluice.pipeline.load.config import LoadConfig
from sluice.pipeline.load.run import run_load
from sluice.testing.broker import create_topic
from tests.pipeline.broker_fixture import produce
from tests.pipeline.source.typed_values import (
    bad_json_values,
    bad_protobuf_values,
    json_values,
    order_class,
    protobuf_values,
)

pytestmark = pytest.mark.broker

ORDERS = 300


class Topic:
    """A produced topic: its name, format, the expected row per (partition, offset) and the
    expected error per (partition, offset) of each bad value."""

    def __init__(self, name: str, fmt: str) -> None:
        self.name = name
        self.format = fmt
        self.rows: dict[tuple[int, int], dict[str, Any]] = {}
        self.errors: dict[tuple[int, int], str] = {}


def _produce(
    bootstrap: str,
    topic: Topic,
    good: list[tuple[bytes, dict[str, Any]]],
    bad: list[tuple[bytes | None, str]],
) -> Topic:
    """Good values keyed ``g<i>``, a bad one after every 50th, spread over two partitions."""
    create_topic(bootstrap, topic.name, 2)
    records: list[dict[str, Any]] = []
    for i, (value, _) in enumerate(good):
        records.append({"topic": topic.name, "partition": i % 2, "key": f"g{i}".encode(),
                        "value": value})  # fmt: skip
        if i % 50 == 49 and i // 50 < len(bad):
            records.append({"topic": topic.name, "partition": i % 2,
                            "key": f"b{i // 50}".encode(), "value": bad[i // 50][0]})  # fmt: skip
    for j in range(ORDERS // 50, len(bad)):
        records.append({"topic": topic.name, "partition": j % 2, "key": f"b{j}".encode(),
                        "value": bad[j][0]})  # fmt: skip
    for m in produce(bootstrap, records):
        assert m.key is not None
        kind, n = m.key.decode()[0], int(m.key.decode()[1:])
        if kind == "g":
            topic.rows[m.partition, m.offset] = good[n][1]
        else:
            topic.errors[m.partition, m.offset] = bad[n][1]
    assert len(topic.rows) == ORDERS and len(topic.errors) == len(bad)
    return topic


@pytest.fixture(scope="module")
def json_topic(kafka_broker: Any, registry_url: str) -> Topic:
    topic = Topic(f"typed-json-{uuid.uuid4().hex[:8]}", "json-schema")
    good = json_values(registry_url, topic.name, ORDERS)
    return _produce(
        kafka_broker.bootstrap, topic, good, bad_json_values(registry_url, topic.name, good[0][0])
    )


@pytest.fixture(scope="module")
def protobuf_topic(
    kafka_broker: Any, registry_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Topic:
    topic = Topic(f"typed-proto-{uuid.uuid4().hex[:8]}", "protobuf")
    cls = order_class(tmp_path_factory.mktemp("proto"))
    good = protobuf_values(registry_url, topic.name, ORDERS, cls)
    return _produce(kafka_broker.bootstrap, topic, good, bad_protobuf_values(good[0][0]))


def _props(bootstrap: str, registry: str, topic: Topic, warehouse: Path) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": bootstrap,
        "topics": topic.name,
        "warehouse.path": str(warehouse),
        "valueFormat": topic.format,
        "schema.registry.url": registry,
        "minPartitions": "3",
    }


def _check_rows(rows: list[dict[str, Any]], topic: Topic) -> None:
    """``rows`` (a table's, as pyarrow gives them) hold exactly the produced orders."""
    landed: dict[tuple[int, int], dict[str, Any]] = {}
    for row in rows:
        key = (row["partition"], row["offset"])
        assert key not in landed, f"{key} landed twice"
        value = {k: row[k] for k in next(iter(topic.rows.values()))}
        value["counts"] = dict(value["counts"])  # pyarrow gives a map as (key, value) pairs
        landed[key] = value
    assert landed.keys() == topic.rows.keys()
    for key, expected in topic.rows.items():
        assert landed[key] == expected, key


def _check_errors(rows: list[dict[str, Any]], topic: Topic) -> None:
    assert {(r["partition"], r["offset"]): r["error"] for r in rows} == topic.errors
    assert all(r["topic"] == topic.name and r["reason"] for r in rows)


@pytest.mark.parametrize("which", ["protobuf", "json-schema"])
def test_parquet_load_lands_typed_columns_and_errors(
    which: str,
    spark: Any,
    kafka_broker: Any,
    registry_url: str,
    json_topic: Topic,
    protobuf_topic: Topic,
    tmp_path: Path,
) -> None:
    topic = protobuf_topic if which == "protobuf" else json_topic
    config = LoadConfig.from_properties(
        _props(kafka_broker.bootstrap, registry_url, topic, tmp_path)
    )
    report = run_load(config, spark)
    assert (report.status, report.total_rows, report.total_errors) == (
        "published", ORDERS, len(topic.errors)
    )  # fmt: skip
    assert report.reader_schema is not None
    assert report.reader_schema["type"] == ("PROTOBUF" if which == "protobuf" else "JSON")
    run_dir = tmp_path / "events" / "load=1"
    data = pq.read_table(run_dir / f"topic={topic.name}")
    assert data.schema.field("id").type == pa.int64()
    assert data.schema.field("lines").type.value_type.field("sku").type == pa.string()
    _check_rows(data.to_pylist(), topic)
    _check_errors(pq.read_table(run_dir / "_errors").to_pylist(), topic)


@pytest.mark.parametrize("which", ["protobuf", "json-schema"])
def test_iceberg_load_lands_typed_columns_and_errors(
    which: str,
    spark: Any,
    kafka_broker: Any,
    registry_url: str,
    json_topic: Topic,
    protobuf_topic: Topic,
    tmp_path: Path,
) -> None:
    topic = protobuf_topic if which == "protobuf" else json_topic
    props: Mapping[str, str] = {
        **_props(kafka_broker.bootstrap, registry_url, topic, tmp_path / "wh"),
        "table.format": "iceberg",
    }
    config = LoadConfig.from_properties(props)
    report = run_load(config, spark)
    assert (report.status, report.total_rows, report.total_errors) == (
        "published", ORDERS, len(topic.errors)
    )  # fmt: skip
    iceberg = config.iceberg
    assert iceberg is not None
    catalog = iceberg.open_catalog()
    table = catalog.load_table(iceberg.identifier(topic.name))
    _check_rows(table.scan().to_arrow().to_pylist(), topic)
    errors = catalog.load_table(iceberg.errors_identifier(topic.name))
    _check_errors(errors.scan().to_arrow().to_pylist(), topic)
