"""``LogConfig``: topic-level booleans read as Kafka's ``ConfigDef`` reads them."""

from __future__ import annotations

import pytest

from sluice.broker.log.log_config import LogConfig


@pytest.mark.parametrize(("raw", "expected"), [("true", True), ("FALSE", False), (" True ", True)])
def test_a_boolean_topic_config_in_any_case(raw: str, expected: bool) -> None:
    config = LogConfig().with_overrides({"read.flushed.only": raw})
    assert config.read_flushed_only is expected


@pytest.mark.parametrize("raw", ["yes", "1", "", " "])
def test_a_bad_boolean_topic_config_names_the_setting_and_the_value(raw: str) -> None:
    with pytest.raises(
        ValueError, match=rf"read_flushed_only: expected true or false, found '{raw}'"
    ):
        LogConfig().with_overrides({"read.flushed.only": raw})


@pytest.mark.parametrize("raw", ["maybe", ""])
def test_unclean_leader_election_is_checked_though_replication_reads_it(raw: str) -> None:
    with pytest.raises(ValueError, match="unclean.leader.election.enable: expected true or false"):
        LogConfig().with_overrides({"unclean.leader.election.enable": raw})
    assert LogConfig().with_overrides({"unclean.leader.election.enable": "TRUE"}) == LogConfig()
