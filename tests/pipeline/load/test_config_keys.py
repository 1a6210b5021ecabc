"""The nightly load's configuration refuses keys nothing reads, naming the nearest known one
(``failOnDataLos=false`` was once accepted silently and the load published past lost data)."""

from __future__ import annotations

import pytest

from sluice.pipeline.load.run import LoadConfig, LoadConfigError

BASE = {
    "kafka.bootstrap.servers": "127.0.0.1:9092",
    "topics": "page_views",
    "warehouse.path": "/tmp/warehouse",
}


def test_a_misspelt_key_is_refused_with_the_nearest_one() -> None:
    with pytest.raises(LoadConfigError, match=r"failOnDataLos: .*did you mean 'failOnDataLoss'\?"):
        LoadConfig.from_properties({**BASE, "failOnDataLos": "false"})


def test_kafka_and_spark_keys_pass_through() -> None:
    config = LoadConfig.from_properties(
        {**BASE, "kafka.isolation.level": "read_committed", "spark.executor.memory": "1g"}
    )
    assert config.kafka == {"kafka.isolation.level": "read_committed"}
    assert config.spark == {"spark.executor.memory": "1g"}
