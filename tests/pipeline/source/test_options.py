"""Tests for sluice.pipeline.source.options: Spark's Kafka source options parsed."""

from __future__ import annotations

import re

import pytest

from sluice.common.topic_partition import TopicPartition
from sluice.pipeline.source.options import (
    Assign,
    CaseInsensitiveOptions,
    ConsumerStrategyError,
    EarliestEndingOffsetError,
    InvalidAssignError,
    InvalidBooleanOptionError,
    InvalidOffsetsError,
    InvalidPositiveIntegerError,
    InvalidSubscribeError,
    InvalidSubscribePatternError,
    LatestStartingOffsetError,
    StreamingEndingOffsetsError,
    Subscribe,
    SubscribePattern,
    ValueOptionError,
    ValueOptions,
    complete_offsets,
    named_topics,
    offsets_to_json,
    parse_assign,
    parse_consumer_strategy,
    parse_ending_offsets,
    parse_source_options,
    parse_starting_offsets,
    parse_subscribe,
    parse_subscribe_pattern,
)
from sluice.pipeline.source.value_format import ValueFormat

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


def test_starting_offsets_keywords_and_defaults() -> None:
    assert parse_starting_offsets(None) == "earliest"
    assert parse_starting_offsets(None, streaming=True) == "latest"
    assert parse_starting_offsets(" EARLIEST ") == "earliest"
    assert parse_starting_offsets("latest", streaming=True) == "latest"


def test_starting_offsets_json() -> None:
    spec = parse_starting_offsets('{"topicA":{"0":23,"1":-2},"topicB":{"0":0}}')
    assert spec == {"topicA": {0: 23, 1: -2}, "topicB": {0: 0}}


def test_batch_may_not_start_at_latest() -> None:
    with pytest.raises(LatestStartingOffsetError, match="startingOffsets.*found 'latest'"):
        parse_starting_offsets("latest")
    with pytest.raises(LatestStartingOffsetError, match=r"found -1 for t-1"):
        parse_starting_offsets('{"t":{"0":5,"1":-1}}')
    # A streaming query may.
    assert parse_starting_offsets('{"t":{"0":-1}}', streaming=True) == {"t": {0: -1}}


def test_ending_offsets_rules() -> None:
    assert parse_ending_offsets(None) == "latest"
    assert parse_ending_offsets('{"t":{"0":-1,"1":7}}') == {"t": {0: -1, 1: 7}}
    with pytest.raises(EarliestEndingOffsetError, match="endingOffsets.*found 'earliest'"):
        parse_ending_offsets("earliest")
    with pytest.raises(EarliestEndingOffsetError, match="found -2 for t-0"):
        parse_ending_offsets('{"t":{"0":-2}}')
    assert parse_ending_offsets(None, streaming=True) is None
    with pytest.raises(StreamingEndingOffsetsError, match="endingOffsets.*found 'latest'"):
        parse_ending_offsets("latest", streaming=True)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "soon",
        "[]",
        "{}",
        '{"t":[0,1]}',
        '{"t":{}}',
        '{"t":{"x":1}}',
        '{"t":{"-1":1}}',
        '{"t":{"0":-3}}',
        '{"t":{"0":1.5}}',
        '{"t":{"0":true}}',
        '{"t":{"0":"5"}}',
        '{"t":{"0":5}',
    ],
)
def test_bad_offsets_json_names_option_and_value(text: str) -> None:
    with pytest.raises(InvalidOffsetsError) as info:
        parse_ending_offsets(text)
    assert "'endingOffsets'" in str(info.value)
    assert repr(text) in str(info.value)


def test_assign() -> None:
    assert parse_assign(' {"a":[1,0,1],"b":[2]} ') == Assign({"a": [0, 1], "b": [2]})
    for bad in ["a:0", "{}", '{"a":[]}', '{"a":[-1]}', '{"a":"0"}', '{"a":[0.5]}', "{"]:
        with pytest.raises(InvalidAssignError, match=re.escape(f"found {bad!r}")):
            parse_assign(bad)


def test_subscribe_and_pattern() -> None:
    assert parse_subscribe(" a, b ,,c ") == Subscribe(["a", "b", "c"])
    with pytest.raises(InvalidSubscribeError, match="found ' , '"):
        parse_subscribe(" , ")
    pattern = parse_subscribe_pattern(r"events\..*")
    assert pattern.assigned({"events.click": 2, "events": 1, "xevents.a": 1}) == [
        TopicPartition("events.click", 0),
        TopicPartition("events.click", 1),
    ]
    with pytest.raises(InvalidSubscribePatternError, match="found '  '"):
        parse_subscribe_pattern("  ")
    with pytest.raises(InvalidSubscribePatternError, match=r"found '\(unclosed'"):
        parse_subscribe_pattern("(unclosed")


def test_strategies_assign_partitions() -> None:
    counts = {"a": 2, "b": 1}
    assert Subscribe(["b", "missing", "b"]).assigned(counts) == [TopicPartition("b", 0)]
    assert Assign({"a": [1], "z": [0]}).assigned(counts) == [
        TopicPartition("a", 1),
        TopicPartition("z", 0),
    ]
    assert isinstance(parse_subscribe_pattern("a|b"), SubscribePattern)


def test_parse_source_options_is_case_insensitive() -> None:
    options = parse_source_options(
        {
            "subscribe": "t",
            "STARTINGOFFSETS": '{"t":{"0":4}}',
            "endingoffsets": "latest",
            "failOnDataLoss": "FALSE",
            "minpartitions": "8",
            "maxRecordsPerPartition": "1000",
            "kafka.bootstrap.servers": "127.0.0.1:9092",
        }
    )
    assert options.strategy == Subscribe(["t"])
    assert options.starting_offsets == {"t": {0: 4}}
    assert options.ending_offsets == "latest"
    assert options.fail_on_data_loss is False
    assert options.min_partitions == 8
    assert options.max_records_per_partition == 1000
    defaults = parse_source_options({"assign": '{"t":[0]}'})
    assert defaults.fail_on_data_loss is True
    assert (defaults.starting_offsets, defaults.ending_offsets) == ("earliest", "latest")
    assert defaults.min_partitions is None


def test_exactly_one_strategy() -> None:
    with pytest.raises(ConsumerStrategyError, match="found 0"):
        parse_source_options({})
    with pytest.raises(ConsumerStrategyError, match=r"found 2 \(assign, subscribe\)"):
        parse_source_options({"subscribe": "a", "assign": '{"a":[0]}'})


@pytest.mark.parametrize("value", ["0", "-3", "two", "1.5", ""])
def test_positive_integer_options(value: str) -> None:
    message = f"minPartitions: expected a positive integer, found {value!r}"
    with pytest.raises(InvalidPositiveIntegerError, match=re.escape(message)):
        parse_source_options({"subscribe": "a", "minPartitions": value})


def test_boolean_option() -> None:
    with pytest.raises(
        InvalidBooleanOptionError, match="failOnDataLoss: expected true or false, found 'yes'"
    ):
        parse_source_options({"subscribe": "a", "failOnDataLoss": "yes"})


def test_offsets_json_helpers() -> None:
    assert offsets_to_json({"b": {1: 5, 0: 3}, "a": {0: 1}}) == '{"a":{"0":1},"b":{"0":3,"1":5}}'
    assert parse_starting_offsets(offsets_to_json({"t": {0: 9}})) == {"t": {0: 9}}
    assert complete_offsets({"t": {0: 9, 5: 1}}, [T0, T1, TopicPartition("u", 0)]) == {
        "t": {0: 9, 1: -2},
        "u": {0: -2},
    }


# --------------------------------------------------------------------------------------------
# Keys, scalar options, read options, typed values
# --------------------------------------------------------------------------------------------


def test_keys_match_whatever_their_case() -> None:
    options = CaseInsensitiveOptions({"FAILONDATALOSS": "true", "kafka.Bootstrap.Servers": "x"})
    assert options["failOnDataLoss"] == "true"
    assert "kafka.bootstrap.servers" in options
    assert sorted(options) == ["failondataloss", "kafka.bootstrap.servers"]
    assert options.get("minPartitions") is None


@pytest.mark.parametrize(
    ("key", "error"),
    [
        ("failOnDataLoss", InvalidBooleanOptionError),
        ("maxRecordsPerPartition", InvalidPositiveIntegerError),
    ],
)
def test_a_blank_source_option_is_an_error_not_the_default(
    key: str, error: type[Exception]
) -> None:
    # Spark's toBoolean / toInt refuse "" too; only .properties files treat blank as unset.
    with pytest.raises(error, match=f"{key}: expected .*, found ' '"):
        parse_source_options({"subscribe": "a", key: " "})


def test_consumer_strategy_and_named_topics() -> None:
    assert parse_consumer_strategy({"SUBSCRIBE": "a,b"}) == Subscribe(["a", "b"])
    assert named_topics(Subscribe(["a", "b"])) == ["a", "b"]
    assert named_topics(Assign({"x": [0], "y": [1]})) == ["x", "y"]
    assert named_topics(parse_subscribe_pattern("a.*")) is None


def test_value_options() -> None:
    assert ValueOptions.parse({"subscribe": "a"}) is None
    avro = ValueOptions.parse(
        {
            "valueformat": "AVRO",
            "schema.registry.url": " http://r:8081 ",
            "valueSchemaId": "7",
            "valueColumns": "struct",
            "decodeErrorPath": "/errors",
        }
    )
    assert avro == ValueOptions("http://r:8081", None, None, 7, True, "errorTable", "/errors")
    assert ValueOptions.from_json(avro.to_json()) == avro
    fails = ValueOptions.parse({"valueFormat": "avro", "schema.registry.url": "http://r"})
    assert fails is not None and fails.on_decode_error == "fail"
    fails.require_error_path()
    for options, message in [
        (
            {"valueFormat": "json"},
            "valueFormat: expected binary, avro, json-schema, protobuf, found 'json'",
        ),
        (
            {"valueSchemaMessage": "a.B"},
            "valueSchemaMessage: expected only with valueFormat=protobuf, found valueFormat=avro",
        ),
        ({"valueFormat": "avro"}, "schema.registry.url: expected a URL, found none"),
        ({"valueColumns": "wide"}, "valueColumns: expected flatten or struct, found 'wide'"),
        ({"onDecodeError": "skip"}, "onDecodeError: expected fail or errorTable, found 'skip'"),
    ]:
        base = {"valueFormat": "avro", "schema.registry.url": "http://r"}
        with pytest.raises(ValueOptionError, match=re.escape(message)):
            ValueOptions.parse({**base, **options} if "valueFormat" not in options else options)
    # errorTable without a directory is parsed (a load supplies it per run), not read from.
    later = ValueOptions.parse(
        {"valueFormat": "avro", "schema.registry.url": "http://r", "onDecodeError": "errortable"}
    )
    assert later is not None and later.on_decode_error == "errorTable"
    with pytest.raises(ValueOptionError, match="decodeErrorPath: expected a directory"):
        later.require_error_path()
    protobuf = ValueOptions.parse(
        {"valueFormat": "Protobuf", "schema.registry.url": "http://r", "valueSchemaMessage": "a.B"}
    )
    assert protobuf == ValueOptions("http://r", value_format=ValueFormat.PROTOBUF, message="a.B")
    assert ValueOptions.from_json(protobuf.to_json()) == protobuf
    json_schema = ValueOptions.parse({"valueFormat": "JSON-Schema", "schema.registry.url": "r"})
    assert json_schema is not None and json_schema.value_format is ValueFormat.JSON_SCHEMA


# --------------------------------------------------------------------------------------------
# Timestamps: precedence, forms, Spark's checks
# --------------------------------------------------------------------------------------------


def test_timestamp_options_take_precedence_as_in_spark() -> None:
    from sluice.pipeline.source.options import TimestampSpec

    both = {
        "subscribe": "t",
        "startingTimestamp": "1000",
        "startingOffsetsByTimestamp": '{"t":{"0":5}}',
        "startingOffsets": "earliest",
        "endingOffsetsByTimestamp": '{"t":{"0":7000}}',
        "endingOffsets": "latest",
    }
    parsed = parse_source_options(both)
    # 1. the global timestamp, 2. per-partition timestamps, 3. offsets.
    assert parsed.starting_timestamps == TimestampSpec("startingTimestamp", every=1000)
    assert parsed.ending_timestamps == TimestampSpec(
        "endingOffsetsByTimestamp", per_partition={"t": {0: 7000}}
    )
    only_json = parse_source_options(
        {"subscribe": "t", "startingOffsetsByTimestamp": '{"t":{"1":9}}'}
    )
    assert only_json.starting_timestamps == TimestampSpec(
        "startingOffsetsByTimestamp", per_partition={"t": {1: 9}}
    )
    assert parse_source_options({"subscribe": "t"}).starting_timestamps is None
    latest = parse_source_options(
        {"subscribe": "t", "startingTimestamp": "5", "startingOffsetsByTimestampStrategy": "LATEST"}
    )
    assert latest.starting_timestamps is not None
    assert latest.starting_timestamps.on_no_match == "latest"


def test_timestamp_option_errors() -> None:
    from sluice.pipeline.source.options import (
        InvalidTimestampError,
        InvalidTimestampStrategyError,
        TimestampRangeError,
    )

    base = {"subscribe": "t"}
    with pytest.raises(InvalidTimestampError, match="'startingTimestamp': expected a timestamp"):
        parse_source_options({**base, "startingTimestamp": "yesterday"})
    with pytest.raises(InvalidTimestampError, match="found '-3'"):
        parse_source_options({**base, "endingTimestamp": "-3"})
    with pytest.raises(InvalidTimestampError, match="'endingOffsetsByTimestamp': expected JSON"):
        parse_source_options({**base, "endingOffsetsByTimestamp": '{"t":[0]}'})
    with pytest.raises(InvalidTimestampStrategyError, match="expected error or latest"):
        parse_source_options({**base, "startingOffsetsByTimestampStrategy": "earliest"})
    with pytest.raises(
        TimestampRangeError, match=r"t-0: expected the starting timestamp <= .* 9 > 8"
    ):
        parse_source_options(
            {**base, "startingOffsetsByTimestamp": '{"t":{"0":9}}',
             "endingOffsetsByTimestamp": '{"t":{"0":8}}'}
        )  # fmt: skip
    with pytest.raises(TimestampRangeError, match=r"expected the same partitions"):
        parse_source_options(
            {**base, "startingOffsetsByTimestamp": '{"t":{"0":1}}',
             "endingOffsetsByTimestamp": '{"t":{"1":8}}'}
        )  # fmt: skip
    for key in ("endingTimestamp", "endingOffsetsByTimestamp"):
        with pytest.raises(StreamingEndingOffsetsError, match="not valid in streaming queries"):
            parse_source_options({**base, key: "1"}, streaming=True)
    # -2 / -1 are earliest / latest (Kafka's ListOffsets), accepted as Spark passes them on.
    minus = parse_source_options({**base, "startingOffsetsByTimestamp": '{"t":{"0":-2,"1":-1}}'})
    assert minus.starting_timestamps is not None
    assert minus.starting_timestamps.per_partition == {"t": {0: -2, 1: -1}}
