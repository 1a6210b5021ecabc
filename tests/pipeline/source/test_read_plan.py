"""Tests for sluice.pipeline.source.read_plan: the ``readPlan`` option, round trip and rules."""

from __future__ import annotations

import json

import pytest

from sluice.pipeline.source.avro_columns import ReaderSchema
from sluice.pipeline.source.options import AvroOptions
from sluice.pipeline.source.ranges import OffsetRange
from sluice.pipeline.source.read_plan import (
    PLANNED_OPTIONS,
    READ_PLAN_OPTION,
    InvalidReadPlanError,
    ReadPlan,
)

RANGES = (OffsetRange("a", 0, 0, 10), OffsetRange("a", 1, 5, 5), OffsetRange("b", 0, 3, 9))
AVRO = AvroOptions("http://r:8081", "a-value", None, None, False, "errorTable", "/run/_errors")
READER = ReaderSchema('{"type":"record","name":"R","fields":[]}', 4, "a-value", 2)


def test_round_trip_binary_and_typed() -> None:
    binary = ReadPlan(RANGES, fail_on_data_loss=False, min_partitions=4)
    assert ReadPlan.decode(binary.encode()) == binary
    typed = ReadPlan(RANGES, max_records_per_partition=100, avro=AVRO, reader_schema=READER)
    assert ReadPlan.decode(typed.encode()) == typed
    doc = json.loads(typed.encode())
    assert doc["version"] == 1
    assert doc["ranges"][0] == {"topic": "a", "partition": 0, "start": 0, "end": 10}
    assert doc["avro"]["reader"]["schema_id"] == 4


def test_from_options_takes_any_key_case_and_refuses_what_the_plan_decides() -> None:
    plan = ReadPlan(RANGES)
    assert ReadPlan.from_options({"kafka.bootstrap.servers": "x"}) is None
    assert ReadPlan.from_options({"readplan": plan.encode(), "metricsPath": "/m"}) == plan
    for key in ("subscribe", "STARTINGOFFSETS", "valueFormat", "failOnDataLoss"):
        with pytest.raises(InvalidReadPlanError, match="expected no option the plan decides"):
            ReadPlan.from_options({READ_PLAN_OPTION: plan.encode(), key: "x"})
    assert "assign" in PLANNED_OPTIONS and "metricsPath" not in PLANNED_OPTIONS


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "readPlan: expected a JSON object, found undecodable text"),
        ("[]", "readPlan: expected a JSON object, found list"),
        ('{"version": 2}', "readPlan.version: expected 1, found 2"),
        ('{"version": 1, "ranges": []}', "readPlan: expected a version 1 plan, found KeyError"),
    ],
)
def test_decode_errors(text: str, message: str) -> None:
    with pytest.raises(InvalidReadPlanError, match=message):
        ReadPlan.decode(text)


def test_invariants() -> None:
    with pytest.raises(InvalidReadPlanError, match=r"ranges: expected 0 <= start <= end.*a-0"):
        ReadPlan((OffsetRange("a", 0, 5, 4),))
    with pytest.raises(InvalidReadPlanError, match="one range per partition"):
        ReadPlan((OffsetRange("a", 0, 0, 4), OffsetRange("a", 0, 4, 8)))
    with pytest.raises(InvalidReadPlanError, match="min_partitions: expected a positive"):
        ReadPlan(RANGES, min_partitions=0)
    with pytest.raises(InvalidReadPlanError, match="options and reader schema together"):
        ReadPlan(RANGES, avro=AVRO)
    with pytest.raises(ValueError, match="decodeErrorPath: expected a directory"):
        ReadPlan(RANGES, avro=AVRO.__class__(**{**AVRO.to_json(), "error_path": None}),
                 reader_schema=READER)  # fmt: skip


def test_include_headers_is_in_every_plan() -> None:
    plan = ReadPlan(RANGES)
    assert plan.include_headers is True  # the load's plans keep headers (lineage)
    assert json.loads(plan.encode())["include_headers"] is True
    without = ReadPlan(RANGES, include_headers=False)
    assert ReadPlan.decode(without.encode()) == without
    # A plan written before the field existed read headers: it still does.
    doc = json.loads(without.encode())
    del doc["include_headers"]
    assert ReadPlan.decode(json.dumps(doc)).include_headers is True
    with pytest.raises(InvalidReadPlanError, match="include_headers: expected true or false"):
        ReadPlan(RANGES, include_headers="yes")  # type: ignore[arg-type]
    for key in ("includeHeaders", "startingTimestamp", "endingOffsetsByTimestamp"):
        with pytest.raises(InvalidReadPlanError, match="expected no option the plan decides"):
            ReadPlan.from_options({READ_PLAN_OPTION: plan.encode(), key: "1"})


def test_the_plan_says_its_isolation_level_and_the_read_must_agree() -> None:
    """A plan's ranges were bounded with one isolation level (read_committed by default: the
    load plans with it) and are read with it; ``kafka.isolation.level`` beside it must agree."""
    plan = ReadPlan(RANGES)
    assert plan.isolation_level == "read_committed"
    assert json.loads(plan.encode())["isolation_level"] == "read_committed"
    uncommitted = ReadPlan(RANGES, isolation_level="read_uncommitted")
    assert ReadPlan.decode(uncommitted.encode()) == uncommitted
    # A plan written before the field existed was bounded by high watermarks and read so.
    doc = json.loads(plan.encode())
    del doc["isolation_level"]
    assert ReadPlan.decode(json.dumps(doc)).isolation_level == "read_uncommitted"
    with pytest.raises(
        InvalidReadPlanError,
        match="isolation_level: expected read_committed or read_uncommitted, found 'dirty'",
    ):
        ReadPlan(RANGES, isolation_level="dirty")
    for key, value in (("kafka.isolation.level", "READ_COMMITTED"), ("KAFKA.ISOLATION.LEVEL",
                                                                    "read_committed")):  # fmt: skip
        assert ReadPlan.from_options({READ_PLAN_OPTION: plan.encode(), key: value}) == plan
    with pytest.raises(
        InvalidReadPlanError,
        match="option 'kafka.isolation.level': expected the plan's read_committed .* found "
        "read_uncommitted",
    ):
        ReadPlan.from_options(
            {READ_PLAN_OPTION: plan.encode(), "kafka.isolation.level": "read_uncommitted"}
        )
    with pytest.raises(InvalidReadPlanError, match="expected read_committed or read_uncommitted"):
        ReadPlan.from_options({READ_PLAN_OPTION: plan.encode(), "kafka.isolation.level": "x"})
