"""``AuditConfig`` without brokers or Spark: the documented defaults, every key read, one clear
error per malformed key, ``conf/audit.properties`` parses, and ``--until`` times."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sluice.common.properties import load_properties
from sluice.pipeline.audit.config import (
    TIERS,
    AuditConfig,
    AuditConfigError,
    KafkaCluster,
    parse_time,
)

REPO = Path(__file__).resolve().parents[3]

BASE = {
    "live.clusters": "live-a",
    "live-a.bootstrap.servers": "127.0.0.1:9092",
    "schema.registry.url": "http://127.0.0.1:8081",
}


def test_defaults() -> None:
    config = AuditConfig.from_properties(BASE)
    assert config.live == (KafkaCluster("live-a", "127.0.0.1:9092"),)
    assert config.offline is None
    assert config.warehouse_tables == ()
    assert config.audit_topic == "sluice-audit"
    assert (config.window_ms, config.grace_ms, config.lookback_ms) == (60_000, 60_000, None)
    assert config.topics == ()
    assert config.tiers == ("live",)  # only the configured tiers
    assert config.warehouse_cutoff == "load"
    assert config.report_dir == "file://" + os.path.abspath("./build/audit")
    assert config.spark_master == "local[2]"
    assert (config.spark, config.kafka) == ({}, {})


def test_every_key_is_read() -> None:
    config = AuditConfig.from_properties(
        {
            **BASE,
            "live.clusters": "live-a, live-b",
            "live-b.bootstrap.servers": "127.0.0.1:9093",
            "offline.alias": "dc2",
            "offline.bootstrap.servers": "127.0.0.1:9192",
            "warehouse.table": "s3a://bucket/t1/, ./t2",
            "warehouse.cutoff": "AUDIT",
            "audit.topic": "audits",
            "window.ms": "10000",
            "lookback.ms": "3600000",
            "topics": "page_view, click",
            "tiers": "warehouse,live",
            "report.dir": "/tmp/audit-report",
            "spark.master": "local[1]",
            "spark.driver.memory": "1g",
            "kafka.security.protocol": "PLAINTEXT",
            "kafka.bootstrap.servers": "ignored:1",
        }
    )
    assert [c.alias for c in config.live] == ["live-a", "live-b"]
    assert config.offline == KafkaCluster("dc2", "127.0.0.1:9192")
    assert config.warehouse_tables == ("s3a://bucket/t1", "file://" + os.path.abspath("t2"))
    assert config.warehouse_cutoff == "audit"
    assert config.audit_topic == "audits"
    assert (config.window_ms, config.grace_ms, config.lookback_ms) == (10_000, 10_000, 3_600_000)
    assert config.topics == ("page_view", "click")
    assert config.tiers == ("live", "warehouse")  # data-path order
    assert config.report_dir == "file:///tmp/audit-report"
    assert config.spark_master == "local[1]"
    assert config.spark == {"spark.driver.memory": "1g"}
    assert config.kafka == {"kafka.security.protocol": "PLAINTEXT"}
    assert config.sources()["live"] == {"live-a": "127.0.0.1:9092", "live-b": "127.0.0.1:9093"}


def test_blank_values_take_the_default() -> None:
    blank = ("window.ms", "grace.ms", "lookback.ms", "audit.topic", "warehouse.cutoff", "tiers")
    config = AuditConfig.from_properties({**BASE, **dict.fromkeys(blank, "")})
    assert (config.window_ms, config.grace_ms, config.lookback_ms) == (60_000, 60_000, None)
    assert (config.audit_topic, config.warehouse_cutoff, config.tiers) == (
        "sluice-audit",
        "load",
        ("live",),
    )


def test_the_shipped_file_parses() -> None:
    config = AuditConfig.from_properties(load_properties(REPO / "conf" / "audit.properties"))
    assert [c.alias for c in config.live] == ["live"]
    assert config.offline == KafkaCluster("offline", "127.0.0.1:9192,127.0.0.1:9193")
    assert config.tiers == TIERS


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"live.clusters": ""}, r"live.clusters: expected a comma list of cluster aliases"),
        ({"live.clusters": "live-a,live-a"}, r"live.clusters: expected distinct aliases"),
        ({"live.clusters": "live a"}, r"live.clusters: cluster alias must match .*'live a'"),
        ({"live-a.bootstrap.servers": " "}, r"live-a.bootstrap.servers: expected a value, found"),
        ({"schema.registry.url": ""}, r"schema.registry.url: expected a value, found none"),
        ({"window.ms": "0"}, r"window.ms: expected a positive integer, found '0'"),
        ({"window.ms": "1e3"}, r"window.ms: expected a positive integer, found '1e3'"),
        ({"grace.ms": "-1"}, r"grace.ms: expected a positive integer, found '-1'"),
        ({"lookback.ms": "day"}, r"lookback.ms: expected a positive integer, found 'day'"),
        ({"topics": "a/b"}, r"topics: expected \[A-Za-z0-9._-\]\+ names, found 'a/b'"),
        ({"audit.topic": "a b"}, r"topics: expected \[A-Za-z0-9._-\]\+ names, found 'a b'"),
        ({"topics": "x,sluice-audit"}, r"topics: expected application topics, found the audit"),
        ({"tiers": "live,archive"}, r"tiers: expected some of live, offline, warehouse, found "),
        ({"tiers": "warehouse"}, r"tiers: warehouse needs warehouse.table, found none"),
        ({"warehouse.cutoff": "later"}, r"warehouse.cutoff: expected load or audit, found 'l"),
        (
            {"offline.bootstrap.servers": "h:1", "offline.alias": "live-a"},
            r"offline.alias: expected an alias no live cluster has, found 'live-a'",
        ),
        (
            {"offline.bootstrap.servers": "h:1", "offline.alias": "off/line"},
            r"offline.alias: cluster alias must match",
        ),
    ],
)
def test_errors_name_the_key_and_what_was_found(props: dict[str, str], message: str) -> None:
    with pytest.raises(AuditConfigError, match=message):
        AuditConfig.from_properties({**BASE, **props})


def test_until_takes_ms_or_iso_8601() -> None:
    assert parse_time("1795312800000") == 1_795_312_800_000
    assert parse_time("2026-11-22T03:00:00Z") == 1_795_316_400_000
    assert parse_time("2026-11-22T03:00:00") == parse_time("2026-11-22T03:00:00+00:00")
    assert parse_time("2026-11-22T04:00:00+01:00") == parse_time("2026-11-22T03:00:00Z")
    with pytest.raises(ValueError, match="expected ms since the epoch or an ISO-8601 time"):
        parse_time("yesterday")


def test_a_misspelt_key_is_refused_with_the_nearest_one() -> None:
    with pytest.raises(AuditConfigError, match=r"windows\.ms: .*did you mean 'window\.ms'\?"):
        AuditConfig.from_properties({**BASE, "windows.ms": "60000"})
    # the families that pass through are not checked
    AuditConfig.from_properties({**BASE, "kafka.fetch.max.bytes": "1", "spark.ui.enabled": "0"})


def test_iceberg_keys_are_checked_at_parse_time_without_pyiceberg() -> None:
    """``warehouse.format=iceberg``: a bad ``iceberg.*`` key is refused when the configuration
    is parsed, in a fresh interpreter that never imports pyiceberg (the base install has none)."""
    props = {**BASE, "warehouse.format": "iceberg", "warehouse.path": "/tmp/warehouse",
             "iceberg.catalog.type": "nosuch"}  # fmt: skip
    script = f"""
import sys
from sluice.pipeline.audit.config import AuditConfig, AuditConfigError
try:
    AuditConfig.from_properties({props!r})
except AuditConfigError as exc:
    print("refused:", exc)
print(sorted(m for m in sys.modules if m.split(".")[0] == "pyiceberg"))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, check=True).stdout.splitlines()  # fmt: skip
    assert out[0].startswith("refused: iceberg.catalog.type"), out
    assert out[1] == "[]", f"expected no pyiceberg module, found {out[1]}"
