"""Tests for sluice.common.topic_partition: Kafka's topic-name rules and the directory name."""

from __future__ import annotations

import pytest

from sluice.common.topic_partition import InvalidTopicError, TopicPartition, validate_topic


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "a/b", "a b", "é"])
def test_names_kafka_refuses(name: str) -> None:
    with pytest.raises(InvalidTopicError, match="expected|cannot be"):
        validate_topic(name)


@pytest.mark.parametrize("name", ["a", "a.b-c_D9", "a" * 249])
def test_names_kafka_accepts(name: str) -> None:
    assert validate_topic(name) == name


def test_directory_name_round_trips_even_with_dashes_in_the_topic() -> None:
    tp = TopicPartition("page-views", 12)
    assert tp.dir_name == str(tp) == "page-views-12"
    assert TopicPartition.from_dir_name("page-views-12") == tp


@pytest.mark.parametrize("name", ["nodash", "t-", "t-x", "../x-1"])
def test_a_directory_that_is_not_a_partition(name: str) -> None:
    with pytest.raises(InvalidTopicError):
        TopicPartition.from_dir_name(name)
