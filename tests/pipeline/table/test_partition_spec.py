"""``partition-by`` parsing and binding to a schema."""

from __future__ import annotations

import pyarrow as pa
import pytest

from sluice.pipeline.table.iceberg_schema import TableSchema
from sluice.pipeline.table.partition_spec import InvalidPartitionByError, PartitionBy

SCHEMA = TableSchema.for_new_table(
    pa.schema(
        [
            ("event_time", pa.timestamp("us", tz="UTC")),
            ("user_id", pa.int64()),
            ("country", pa.string()),
            ("score", pa.float64()),
        ]
    )  # fmt: skip
)


@pytest.mark.parametrize(
    ("text", "canonical", "names"),
    [
        ("day(event_time)", "day(event_time)", ["event_time_day"]),
        ("hour( event_time )", "hour(event_time)", ["event_time_hour"]),
        ("month(event_time), country", "month(event_time), identity(country)",
         ["event_time_month", "country"]),
        ("identity(country),bucket(16, user_id)", "identity(country), bucket(16, user_id)",
         ["country", "user_id_bucket"]),
        ("", "", []),
    ],
)  # fmt: skip
def test_parse_and_bind(text: str, canonical: str, names: list[str]) -> None:
    parsed = PartitionBy.parse(text)
    assert str(parsed) == canonical
    assert [f.name for f in parsed.spec(SCHEMA).fields] == names


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("day(event_time", "expected transform(field)"),
        ("bucket(event_time)", "expected identity, year, month, day, hour"),
        ("bucket(0, user_id)", "found 'bucket(0, user_id)'"),
        ("week(event_time)", "found 'week(event_time)'"),
        ("day(event_time), day(event_time)", "expected each term once"),
    ],
)
def test_bad_text(text: str, message: str) -> None:
    with pytest.raises(
        InvalidPartitionByError, match=message.replace("(", r"\(").replace(")", r"\)")
    ):
        PartitionBy.parse(text)


def test_binding_names_the_field_and_the_type() -> None:
    with pytest.raises(InvalidPartitionByError, match="found no 'event_tiem'"):
        PartitionBy.parse("day(event_tiem)").spec(SCHEMA)
    with pytest.raises(InvalidPartitionByError, match="found country of type string"):
        PartitionBy.parse("day(country)").spec(SCHEMA)
