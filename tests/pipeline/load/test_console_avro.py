"""``sluice produce --value-format avro`` and ``sluice consume --value-format avro`` (the typed
console tools, ``sluice.cli.value_formats``) against a real broker and registry: 100 JSON lines
in, the same 100 documents out, and the nightly load decodes them into typed columns."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from sluice.pipeline.load.config import LoadConfig
from sluice.pipeline.load.run import run_load
from sluice.testing.broker import create_topic
from sluice.testing.registry import RegistryProcess

pytestmark = pytest.mark.broker

SCHEMA = {
    "type": "record",
    "name": "Click",
    "fields": [
        {"name": "user", "type": "string"},
        {"name": "n", "type": "long"},
        {"name": "ref", "type": ["null", "string"], "default": None},
    ],
}


@pytest.fixture(scope="module")
def registry_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("console-registry")
    process = RegistryProcess(base / "data", base / "registry.log").start()
    yield process.url
    assert process.stop() == 0, process.log()


def _sluice(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sluice", *args], input=stdin, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip


def test_a_round_trip_of_100_records_that_the_load_decodes(
    spark: Any, kafka_broker: Any, registry_url: str, topic_name: str, tmp_path: Path
) -> None:
    create_topic(kafka_broker.bootstrap, topic_name, 2)
    schema = tmp_path / "click.avsc"
    schema.write_text(json.dumps(SCHEMA))
    records = [
        {"user": f"u{i % 7}", "n": i, "ref": None if i % 3 else f"https://example.org/{i}"}
        for i in range(100)
    ]
    produced = _sluice(
        "produce", "--bootstrap-server", kafka_broker.bootstrap, "--topic", topic_name,
        "--value-format", "avro", "--value-schema", str(schema), "--registry", registry_url,
        stdin="".join(json.dumps(r) + "\n" for r in records),
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    consumed = _sluice(
        "consume", "--bootstrap-server", kafka_broker.bootstrap, "--topic", topic_name,
        "--from-beginning", "--max-messages", "100", "--timeout-ms", "10000",
        "--value-format", "avro", "--registry", registry_url,
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    out = [json.loads(line) for line in consumed.stdout.splitlines()]
    assert sorted(out, key=lambda r: r["n"]) == records

    config = LoadConfig.from_properties({
        "kafka.bootstrap.servers": kafka_broker.bootstrap, "topics": topic_name,
        "warehouse.path": str(tmp_path / "wh"), "valueFormat": "avro",
        "schema.registry.url": registry_url,
    })  # fmt: skip
    report = run_load(config, spark)
    assert report.total_rows == 100 and report.total_errors == 0
    files = [str(f) for f in (tmp_path / "wh" / "events").glob("load=*/topic=*/date=*/*.parquet")]
    rows = duckdb.sql(f"SELECT user, n, ref FROM read_parquet({files}) ORDER BY n").fetchall()
    assert [{"user": u, "n": n, "ref": r} for u, n, r in rows] == records


def test_avro_without_a_registry_is_a_usage_error(kafka_broker: Any, topic_name: str) -> None:
    result = _sluice(
        "produce", "--bootstrap-server", kafka_broker.bootstrap, "--topic", topic_name,
        "--value-format", "avro", "--value-schema", "x.avsc",
    )  # fmt: skip
    assert result.returncode == 2
    assert "--value-format avro: expected --registry URL, found none" in result.stderr
