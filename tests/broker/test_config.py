"""Tests for sluice.broker.config: the declared keys and the config class agree."""

from __future__ import annotations

import pytest

from sluice.broker.config import CONFIG_DEF, BrokerConfig, ConfigError
from sluice.broker.transactions.transaction_config import TransactionConfig


def test_an_empty_file_gives_the_class_defaults() -> None:
    # The defaults are declared in CONFIG_DEF (and the docs show those); the dataclass keeps its
    # own for code that builds a config directly: the two must not drift apart.
    assert BrokerConfig.from_properties({}) == BrokerConfig()
    assert TransactionConfig.from_properties({}) == TransactionConfig()


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"num.partitions": "0"}, r"^num.partitions: expected an integer >= 1, found 0$"),
        ({"broker.id": "one"}, r"^broker.id: expected an integer, found 'one'$"),
        ({"metrics.listener": "h:1"}, r"^metrics.listener: expected http://host:port, found"),
        ({"auto.create.topics.enable": "y"}, r"^auto.create.topics.enable: expected true or"),
        ({"transaction.max.timeout.ms": "0"}, r"^transaction.max.timeout.ms: expected a posit"),
        ({"log.dirs": ","}, r"^log.dirs: expected at least one directory, found ','$"),
    ],
)
def test_a_bad_value_names_the_key_expected_and_found(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.from_properties(props)


def test_every_key_the_broker_reads_is_declared_with_a_doc() -> None:
    assert "zookeeper.connect" in CONFIG_DEF.names()
    assert all(key.doc for key in CONFIG_DEF.keys.values())
