"""Tests for sluice.pipeline.table.manifest: round trip, and one validation failure per rule."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

import pytest

from sluice.pipeline.source.options import offsets_to_json
from sluice.pipeline.source.ranges import DataLoss, OffsetRange
from sluice.pipeline.table.manifest import (
    DataFile,
    InvalidManifestError,
    Manifest,
    RangeRecord,
    RowCount,
    Subscription,
    UnsupportedManifestVersionError,
    merge_offsets,
    readable_json,
    valid_run_id,
)


def sample() -> Manifest:
    return Manifest(
        run_id="nightly-2024-01-02",
        table="file:///warehouse/events",
        sequence=2,
        previous_run="nightly-2024-01-01",
        ranges=(
            RangeRecord(OffsetRange("clicks", 0, 10, 20), 10, 1234),
            RangeRecord(OffsetRange("views", 1, 5, 9), 3, 99),
        ),
        offsets={"clicks": {0: 20, 1: 7}, "views": {1: 9}},
        files=(
            DataFile("topic=clicks/date=2024-01-02/part-0.parquet", 2048, 10),
            DataFile("topic=views/date=2024-01-01/part-0.parquet", 1024, 3),
        ),
        row_counts=(
            RowCount("clicks", 0, "2024-01-02", 10),
            RowCount("views", 1, "2024-01-01", 3),
        ),
        schema_ids={"clicks": (3, 1)},
        data_loss=(DataLoss("views", 1, "start", 2, 5, 5, 9, 3),),
        created="2024-01-02T03:04:05+00:00",
    )


def test_round_trip() -> None:
    manifest = sample()
    data = manifest.encode()
    doc = json.loads(data)
    assert doc["version"] == 1
    assert doc["offsets"] == {"clicks": {"0": 20, "1": 7}, "views": {"1": 9}}
    assert doc["schema_ids"] == {"clicks": [1, 3]}
    decoded = Manifest.decode(data)
    assert decoded.to_json() == manifest.to_json()
    assert decoded.ranges == manifest.ranges
    # A range record is its range's fields and its counts side by side.
    assert doc["ranges"][1] == {
        "topic": "views", "partition": 1, "start": 5, "end": 9, "rows": 3, "bytes": 99
    }  # fmt: skip
    assert decoded.total_rows == 13
    # The resume position is a valid Spark startingOffsets value.
    assert offsets_to_json(decoded.offsets) == '{"clicks":{"0":20,"1":7},"views":{"1":9}}'


def test_a_pattern_runs_subscription_round_trips_and_is_optional() -> None:
    # "audits" matched but had nothing new: it is recorded though no range names it.
    matched = ("audits", "clicks", "views")
    manifest = replace(sample(), subscription=Subscription("clicks|views|audits", matched))
    doc = json.loads(manifest.encode())
    assert doc["subscribe_pattern"] == {
        "pattern": "clicks|views|audits", "matched": ["audits", "clicks", "views"]
    }  # fmt: skip
    assert Manifest.decode(manifest.encode()).subscription == manifest.subscription
    # A run that named its topics has no key, and decodes without one.
    assert "subscribe_pattern" not in sample().to_json()
    assert Manifest.decode(sample().encode()).subscription is None


@pytest.mark.parametrize(
    ("subscription", "message"),
    [
        ({"pattern": "", "matched": ["clicks", "views"]}, "subscribe_pattern.pattern: expected a"),
        ({"pattern": "x", "matched": ["views", "clicks"]}, "expected topic names, sorted, each"),
        ({"pattern": "x", "matched": ["clicks", "clicks", "views"]}, "sorted, each once"),
        ({"pattern": "x", "matched": ["clicks", 1]}, "matched: expected a list of topic names"),
        ({"pattern": "x", "matched": "clicks"}, "matched: expected list, found str"),
        ({"pattern": "x", "matched": ["clicks"]}, "expected topics among those 'x' matched, found"),
        ({"pattern": "x", "matched": [], "n": 1}, "expected only the keys ['matched', 'pattern']"),
    ],
)
def test_a_subscription_is_validated(subscription: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidManifestError) as info:
        Manifest.decode(mutated(lambda d: d.update(subscribe_pattern=subscription)))
    assert message in str(info.value)


def test_first_run_and_empty_run() -> None:
    first = Manifest(
        run_id="r1",
        table="/t",
        sequence=1,
        previous_run=None,
        ranges=(RangeRecord(OffsetRange("a", 0, 0, 0), 0, 0),),
        offsets={"a": {0: 0}},
        files=(),
    )
    assert Manifest.decode(first.encode()).previous_run is None


def test_merge_offsets() -> None:
    merged = merge_offsets(
        {"a": {0: 5, 1: 6}}, [OffsetRange("a", 1, 6, 9), OffsetRange("b", 0, 0, 2)]
    )
    assert merged == {"a": {0: 5, 1: 9}, "b": {0: 2}}


def test_valid_run_id() -> None:
    assert valid_run_id("nightly-2024.01_02")
    for bad in ["", ".", "..", "a/b", "a b", "x" * 201, "ä"]:
        assert not valid_run_id(bad)


def mutated(change: Any) -> bytes:
    doc = copy.deepcopy(sample().to_json())
    change(doc)
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("run_id"), "manifest.run_id: expected a value, found nothing"),
        (lambda d: d.update(sequence="2"), "manifest.sequence: expected int, found str '2'"),
        (lambda d: d.update(sequence=True), "manifest.sequence: expected int, found bool"),
        (lambda d: d.update(sequence=0), "manifest.sequence: expected an integer >= 1, found 0"),
        (lambda d: d.update(run_id="a/b"), "manifest.run_id: expected 1-200 characters"),
        (
            lambda d: d.update(previous_run=None),
            "manifest.previous_run: expected null exactly when sequence is 1",
        ),
        (lambda d: d.update(created="yesterday"), "manifest.created: expected an ISO-8601"),
        (lambda d: d.update(extra=1), "expected only the keys"),
        (lambda d: d["ranges"][0].update(end=5), "manifest.ranges[0]: expected 0 <= start <= end"),
        (lambda d: d["ranges"][0].update(rows=11), "expected 0 <= rows <= 10 (end - start)"),
        (lambda d: d["ranges"][0].pop("bytes"), "manifest.ranges[0].bytes: expected a value"),
        (
            lambda d: d["offsets"]["clicks"].update({"0": 19}),
            "manifest.offsets['clicks'][0]: expected the range's end 20, found 19",
        ),
        (lambda d: d["offsets"].update(clicks={"zero": 1}), "manifest.offsets['clicks']"),
        (
            lambda d: d["files"][0].update(path="../x.parquet"),
            "manifest.files[0].path: expected a relative path",
        ),
        (
            lambda d: d["files"][0].update(path="/abs.parquet"),
            "manifest.files[0].path: expected a relative path",
        ),
        (
            lambda d: d["files"][1].update(path=d["files"][0]["path"]),
            "manifest.files[1].path: expected unique paths",
        ),
        (
            lambda d: d["files"][0].update(rows=11),
            "manifest.row_counts: expected rows adding up to the files' 14, found 13",
        ),
        (
            lambda d: d["row_counts"][0].update(date="2024-13-01"),
            "manifest.row_counts[0].date: expected a YYYY-MM-DD date, found '2024-13-01'",
        ),
        (lambda d: d["data_loss"][0].update(bound="middle"), "expected one of ['start', 'end']"),
        (lambda d: d.update(schema_ids={"a": ["1"]}), "manifest.schema_ids['a']"),
        (lambda d: d.update(files={}), "manifest.files: expected list, found dict"),
    ],
)
def test_validation_errors(change: Any, message: str) -> None:
    with pytest.raises(InvalidManifestError) as info:
        Manifest.decode(mutated(change))
    assert message in str(info.value)


def test_unsupported_version() -> None:
    with pytest.raises(UnsupportedManifestVersionError, match="expected 1, found 2"):
        Manifest.decode(mutated(lambda d: d.update(version=2)))


def test_not_json() -> None:
    with pytest.raises(InvalidManifestError, match="expected a JSON object, found undecodable"):
        Manifest.decode(b"\xff{")
    with pytest.raises(InvalidManifestError, match="manifest: expected a JSON object, found list"):
        Manifest.decode(b"[]")


def test_constructor_validates() -> None:
    with pytest.raises(InvalidManifestError, match="one range per partition"):
        Manifest(
            run_id="r1",
            table="/t",
            sequence=1,
            previous_run=None,
            ranges=(
                RangeRecord(OffsetRange("a", 0, 0, 1), 1, 0),
                RangeRecord(OffsetRange("a", 0, 1, 2), 1, 0),
            ),
            offsets={"a": {0: 1}},
            files=(),
        )


def test_the_manifest_is_laid_out_a_key_and_an_entry_a_line() -> None:
    text = sample().encode().decode()
    lines = text.splitlines()
    assert text.endswith("}\n") and lines[0] == "{" and lines[1] == '  "version": 1,'
    assert '  "ranges": [' in lines and "  ]," in lines
    assert (
        '    {"topic": "clicks", "partition": 0, "start": 10, "end": 20, "rows": 10, '
        '"bytes": 1234},' in lines
    )
    assert '    "clicks": {"0": 20, "1": 7},' in lines and '    "views": {"1": 9}' in lines
    assert json.loads(text) == sample().to_json()


@pytest.mark.parametrize(
    "doc",
    [
        {},
        {"a": [], "b": {}, "c": None, "d": "x\ny \u00e9\u2028", "e": 1.5},
        {"a": [1, [2, {"x": []}], {"y": {"z": [None]}}], "b": {"k": [1], "k2": {"n": {}}}},
        {"only": [{"one": 1}]},
    ],
)
def test_readable_json_reads_back_as_the_document(doc: dict[str, Any]) -> None:
    text = readable_json(doc)
    assert json.loads(text) == doc and text.endswith("\n")
    assert json.loads(text.replace("\n", "")) == doc  # the lines are JSON, not just their sum
