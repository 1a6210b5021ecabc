"""Tests for sluice.pipeline.sink.columns: Spark's Kafka sink contract on a schema."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from sluice.pipeline.sink.columns import (
    HEADERS_TYPE,
    ColumnTypeError,
    MissingTopicError,
    MissingValueColumnError,
    SinkColumns,
)


def schema(**columns: object) -> StructType:
    return StructType([StructField(name, t) for name, t in columns.items()])  # type: ignore[arg-type]


def test_every_column_of_the_contract() -> None:
    found = SinkColumns.of(
        schema(
            key=BinaryType(),
            value=StringType(),
            topic=StringType(),
            partition=IntegerType(),
            headers=HEADERS_TYPE,
            timestamp=TimestampType(),
            offset=LongType(),  # not a sink column: ignored, as Spark does
        ),
        topic_option=None,
        typed=False,
    )
    assert found == SinkColumns("string", "binary", True, True, True, "timestamp")


def test_only_value_and_the_topic_option() -> None:
    found = SinkColumns.of(schema(value=BinaryType()), topic_option="t", typed=False)
    assert found == SinkColumns("binary", None, False, False, False, None)


def test_the_topic_option_wins_and_the_column_is_not_checked() -> None:
    found = SinkColumns.of(
        schema(value=BinaryType(), topic=LongType()), topic_option="t", typed=False
    )
    assert not found.topic_column


def test_headers_match_up_to_nullability_and_timestamps_may_be_seconds() -> None:
    headers = ArrayType(
        StructType(
            [StructField("key", StringType(), False), StructField("value", BinaryType(), True)]
        ),
        containsNull=False,
    )
    found = SinkColumns.of(
        schema(value=StringType(), headers=headers, timestamp=DoubleType()),
        topic_option="t",
        typed=False,
    )
    assert found.headers and found.timestamp == "double"


def test_missing_value() -> None:
    with pytest.raises(MissingValueColumnError, match="Required attribute 'value' not found.*key"):
        SinkColumns.of(schema(key=StringType()), topic_option="t", typed=False)


def test_no_topic_anywhere() -> None:
    with pytest.raises(MissingTopicError, match="topic option required"):
        SinkColumns.of(schema(value=StringType()), topic_option=None, typed=False)


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({"value": LongType()}, "value attribute unsupported type bigint: expected value to be "
         "string or binary, found bigint"),
        ({"value": StringType(), "key": IntegerType()}, "key attribute unsupported type int"),
        ({"value": StringType(), "topic": BinaryType()}, "topic attribute unsupported type binary"),
        ({"value": StringType(), "partition": LongType()}, "partition attribute unsupported type "
         "bigint: expected partition to be int"),
        ({"value": StringType(), "headers": ArrayType(StringType())}, "headers attribute "
         "unsupported type array<string>: expected headers to be "
         "array<struct<key:string,value:binary>>"),
        ({"value": StringType(), "timestamp": TimestampNTZType()}, "timestamp attribute "
         "unsupported type timestamp_ntz"),
        ({"value": StructType([StructField("a", IntegerType())])}, "value attribute unsupported "
         "type struct<a:int>"),
    ],
)  # fmt: skip
def test_wrong_types_name_column_and_type(columns: dict[str, object], message: str) -> None:
    with pytest.raises(ColumnTypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        topic = None if "topic" in columns else "t"
        SinkColumns.of(schema(**columns), topic_option=topic, typed=False)


def test_typed_values_are_structs() -> None:
    struct = StructType([StructField("a", IntegerType())])
    assert SinkColumns.of(schema(value=struct), topic_option="t", typed=True).value == "struct"
    with pytest.raises(
        ColumnTypeError, match="expected value to be struct \\(typed valueFormat\\)"
    ):
        SinkColumns.of(schema(value=BinaryType()), topic_option="t", typed=True)
