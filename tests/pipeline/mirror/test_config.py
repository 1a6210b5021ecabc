"""``MirrorConfig``: the documented keys and defaults, each client's librdkafka settings, the
topic filter, and one clear error per malformed key. Also ``conf/mirror.properties`` parses,
and the CLI reports a bad file with exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.cli.mirror_command import main as mirror_main
from sluice.common.properties import load_properties
from sluice.pipeline.mirror.config import MirrorConfig, MirrorConfigError
from sluice.pipeline.mirror.topic_configs import ConfigPropertyFilter

REPO = Path(__file__).resolve().parents[3]

BASE = {
    "clusters": "live-a,live-b",
    "live-a.bootstrap.servers": "127.0.0.1:9092",
    "live-b.bootstrap.servers": "127.0.0.1:9093",
    "target.alias": "offline",
    "target.bootstrap.servers": "127.0.0.1:9192",
}


def parse() -> MirrorConfig:
    return MirrorConfig.from_properties(BASE)


def with_keys(extra: dict[str, str]) -> MirrorConfig:
    return MirrorConfig.from_properties({**BASE, **extra})


def test_defaults() -> None:
    config = parse()
    assert [s.alias for s in config.sources] == ["live-a", "live-b"]
    assert config.source("live-b").bootstrap_servers == "127.0.0.1:9093"
    assert config.target_alias == "offline"
    assert config.group_id == "sluice-mirror"
    assert config.refresh_topics_interval_ms == 10_000
    assert config.batch_max_messages == 5000
    assert config.batch_max_wait_ms == 500
    assert config.commit_timeout_ms == 60_000
    assert config.target_replication_factor == -1
    assert config.metrics_port is None
    assert config.mirrors_topic("anything")


def test_the_shipped_file_parses() -> None:
    config = MirrorConfig.from_properties(load_properties(REPO / "conf" / "mirror.properties"))
    assert [s.alias for s in config.sources] == ["live"]
    assert config.source("live").bootstrap_servers == "127.0.0.1:9092,127.0.0.1:9093"
    assert config.target_bootstrap_servers == "127.0.0.1:9192,127.0.0.1:9193"
    assert (config.metrics_host, config.metrics_port) == ("127.0.0.1", 9501)
    # MirrorMaker 2's keys and defaults, spelled out in the file.
    assert config.refresh_topics_interval_ms == 10_000
    assert (config.sync_topic_configs_enabled, config.sync_topic_configs_interval_s) == (True, 600)
    assert config.config_properties == ConfigPropertyFilter()


def test_every_key_is_read() -> None:
    config = with_keys(
        {
            "group.id": "dc-mirror",
            "topics": "page_.*, audit",
            "topics.exclude": "page_internal.*",
            "refresh.topics.interval.ms": "2500",
            "batch.max.messages": "100",
            "batch.max.wait.ms": "0",
            "commit.timeout.ms": "5000",
            "target.replication.factor": "2",
            "metrics.listener": "http://0.0.0.0:9501",
        }
    )
    assert config.group_id == "dc-mirror"
    assert config.refresh_topics_interval_ms == 2500
    assert config.batch_max_messages == 100
    assert config.batch_max_wait_ms == 0
    assert config.commit_timeout_ms == 5000
    assert config.target_replication_factor == 2
    assert (config.metrics_host, config.metrics_port) == ("0.0.0.0", 9501)


def test_blank_values_take_the_default() -> None:
    keys = ("group.id", "refresh.topics.interval.ms", "batch.max.messages", "batch.max.wait.ms")
    keys += ("commit.timeout.ms", "target.replication.factor", "metrics.listener")
    config = with_keys(dict.fromkeys(keys, " "))
    assert config.group_id == "sluice-mirror"
    assert (config.refresh_topics_interval_ms, config.batch_max_messages) == (10_000, 5000)
    assert (config.batch_max_wait_ms, config.commit_timeout_ms) == (500, 60_000)
    assert config.target_replication_factor == -1
    assert config.metrics_port is None


def test_topic_filter_is_full_match_include_minus_exclude_never_internal() -> None:
    config = with_keys({"topics": "page_.*,audit", "topics.exclude": "page_internal.*, .*-tmp"})
    assert config.mirrors_topic("page_view")
    assert config.mirrors_topic("audit")
    assert not config.mirrors_topic("audit2")  # full match, not search
    assert not config.mirrors_topic("my_audit")
    assert not config.mirrors_topic("page_internal_x")
    assert not config.mirrors_topic("page_view-tmp")
    everything = with_keys({"topics": ".*"})
    assert not everything.mirrors_topic("__consumer_offsets")
    assert not everything.mirrors_topic("__anything")
    assert not with_keys({"topics": ""}).mirrors_topic("page_view")  # nothing included


def test_client_settings_layer_and_the_guarantee_is_fixed() -> None:
    config = with_keys(
        {
            "consumer.fetch.min.bytes": "10",
            "consumer.auto.offset.reset": "latest",
            "live-a.security.protocol": "PLAINTEXT",
            "live-a.fetch.min.bytes": "1",  # below consumer.* in precedence
            "live-a.consumer.fetch.min.bytes": "20",  # above it
            "producer.linger.ms": "50",
            "target.client.rack": "dc2",
            "group.id": "g",
        }
    )
    a = config.consumer_config(config.source("live-a"))
    b = config.consumer_config(config.source("live-b"))
    assert a["fetch.min.bytes"] == "20"
    assert b["fetch.min.bytes"] == "10"
    assert a["security.protocol"] == "PLAINTEXT" and "security.protocol" not in b
    assert a["auto.offset.reset"] == "latest"
    assert a["enable.auto.commit"] == "false" and a["enable.auto.offset.store"] == "false"
    assert (a["group.id"], b["group.id"]) == ("g", "g")
    assert (a["bootstrap.servers"], b["bootstrap.servers"]) == ("127.0.0.1:9092", "127.0.0.1:9093")
    assert config.source_client_config(config.source("live-a")) == {
        "security.protocol": "PLAINTEXT",
        "fetch.min.bytes": "1",
        "bootstrap.servers": "127.0.0.1:9092",
    }
    producer = config.producer_config(config.source("live-a"))
    assert producer["acks"] == "all" and producer["enable.idempotence"] is True
    assert producer["partitioner"] == "murmur2_random"
    assert producer["linger.ms"] == "50" and producer["client.rack"] == "dc2"
    assert producer["bootstrap.servers"] == "127.0.0.1:9192"
    assert config.admin_config() == {"client.rack": "dc2", "bootstrap.servers": "127.0.0.1:9192"}
    defaults = parse().consumer_config(parse().source("live-a"))
    assert defaults["auto.offset.reset"] == "earliest"


def test_the_longest_alias_owns_a_key() -> None:
    config = MirrorConfig.from_properties(
        {
            "clusters": "dc,dc.live",
            "dc.bootstrap.servers": "h1:1",
            "dc.live.bootstrap.servers": "h2:2",
            "dc.live.consumer.fetch.min.bytes": "7",
            "target.alias": "offline",
            "target.bootstrap.servers": "h3:3",
        }
    )
    assert config.source("dc").bootstrap_servers == "h1:1"
    assert config.source("dc.live").bootstrap_servers == "h2:2"
    assert config.consumer_config(config.source("dc.live"))["fetch.min.bytes"] == "7"
    assert "fetch.min.bytes" not in config.consumer_config(config.source("dc"))


def test_settings_that_are_allowed_when_they_agree_with_the_fixed_ones() -> None:
    config = with_keys(
        {
            "consumer.enable.auto.commit": "false",
            "producer.acks": "-1",
            "producer.enable.idempotence": "true",
        }
    )
    assert config.producer_config(config.source("live-a"))["acks"] == "all"


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"clusters": None}, r"clusters: expected a value, found none"),
        ({"clusters": " , "}, r"clusters: expected a comma list, found ' , '"),
        ({"clusters": "live a"}, r"clusters: cluster alias must match .*found 'live a'"),
        ({"clusters": "live-a,live-a"}, r"clusters: expected distinct aliases"),
        ({"clusters": "target"}, r"clusters: expected aliases other than .*found 'target'"),
        ({"live-b.bootstrap.servers": None}, r"live-b.bootstrap.servers: expected a value"),
        ({"target.alias": None}, r"target.alias: expected a value, found none"),
        ({"target.alias": "off/line"}, r"target.alias: cluster alias must match"),
        ({"target.alias": "live-a"}, r"target.alias: expected a name other than the source"),
        ({"target.bootstrap.servers": ""}, r"target.bootstrap.servers: expected a value"),
        ({"batch.max.messages": "0"}, r"batch.max.messages: expected an integer >= 1, found 0$"),
        ({"batch.max.messages": "many"}, r"batch.max.messages: expected an integer, found 'many'"),
        ({"refresh.topics.interval.ms": "-5"}, r"refresh.topics.interval.ms: expected an int"),
        ({"batch.max.wait.ms": "x"}, r"batch.max.wait.ms: expected an integer, found 'x'"),
        ({"batch.max.wait.ms": "-1"}, r"batch.max.wait.ms: expected an integer >= 0, found -1$"),
        ({"commit.timeout.ms": "0"}, r"commit.timeout.ms: expected an integer >= 1"),
        ({"target.replication.factor": "0"}, r"target.replication.factor: expected -1 .* '0'"),
        ({"target.replication.factor": "-2"}, r"target.replication.factor: expected an int"),
        ({"metrics.listener": "127.0.0.1:9501"}, r"metrics.listener: expected http://host:port"),
        ({"metrics.listener": "http://h:port"}, r"metrics.listener: expected http://host:port"),
        ({"topics": "page_(view"}, r"topics: expected comma-separated regular expressions, "),
        ({"topics.exclude": "*x"}, r"topics.exclude: expected comma-separated regular exp"),
        ({"live-c.bootstrap.servers": "h:1"}, r"live-c.bootstrap.servers: expected a mirror key"),
        ({"topic": "x"}, r"topic: expected a mirror key, consumer.\*"),
        ({"consumer.enable.auto.commit": "true"}, r"consumer.enable.auto.commit: the mirror "),
        ({"live-a.enable.auto.offset.store": "true"}, r"live-a.enable.auto.offset.store: the "),
        ({"live-a.consumer.enable.auto.commit": "true"}, r"live-a.consumer.enable.auto.commit"),
        ({"producer.acks": "1"}, r"producer.acks: the target must acknowledge .*found '1'"),
        ({"target.enable.idempotence": "false"}, r"target.enable.idempotence: the target must"),
        ({"consumer.group.id": "x"}, r"consumer.group.id: expected the mirror's own key group.id"),
        ({"live-a.bootstrap.servers.x": "x"}, None),  # a librdkafka key: librdkafka checks it
        ({"consumer.bootstrap.servers": "h:1"}, r"consumer.bootstrap.servers: expected the "),
        ({"consumer.": "x"}, r"consumer.: expected consumer.<librdkafka key>, found no key"),
    ],
)
def test_errors_name_the_key_and_what_was_found(
    props: dict[str, str | None], message: str | None
) -> None:
    changed = {**BASE, **props}
    clean = {k: v for k, v in changed.items() if v is not None}
    if message is None:
        MirrorConfig.from_properties(clean)
        return
    with pytest.raises(MirrorConfigError, match=message):
        MirrorConfig.from_properties(clean)


def test_the_cli_reports_a_bad_configuration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mirror.properties"
    path.write_text("clusters=live\nlive.bootstrap.servers=127.0.0.1:1\n", encoding="utf-8")
    assert mirror_main(["lag", "--config", str(path)]) == 2
    assert "sluice mirror lag: bad configuration: target.alias: expected a value" in (
        capsys.readouterr().err
    )
    assert mirror_main(["--config", str(path), "--override", "target.alias=offline"]) == 2
    assert "target.bootstrap.servers: expected a value" in capsys.readouterr().err
    assert mirror_main(["run", "--config", str(tmp_path / "missing.properties")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert mirror_main(["lag"]) == 2
    assert "expected --config <file>, found none" in capsys.readouterr().err


def test_exactly_once_keys_sluice_s_and_its_mirrormaker_2_alias() -> None:
    assert parse().exactly_once is False
    assert "transactional.id" not in parse().producer_config(parse().source("live-a"))
    for keys in (
        {"exactly.once.enabled": "true"},
        {"exactly.once.source.support": "enabled"},
        {"exactly.once.source.support": "ENABLED"},
        {"exactly.once.enabled": "true", "exactly.once.source.support": "enabled"},
    ):
        config = with_keys(keys)
        assert config.exactly_once, keys
        source = config.source("live-b")
        producer = config.producer_config(source)
        # One transactional id per group and source cluster: stable across restarts.
        assert producer["transactional.id"] == "sluice-mirror-live-b"
        assert (producer["acks"], producer["enable.idempotence"]) == ("all", True)
        assert config.offsets_topic(source) == "mm2-offsets.live-b.internal"
        reader = config.offsets_reader_config()
        assert reader["isolation.level"] == "read_committed"
        assert reader["bootstrap.servers"] == "127.0.0.1:9192"
    # MirrorMaker 2's other values: disabled, and preparing (its rolling-upgrade step).
    for value in ("disabled", "preparing"):
        assert with_keys({"exactly.once.source.support": value}).exactly_once is False
    assert (
        with_keys({"group.id": "g", "exactly.once.enabled": "true"}).transactional_id(
            parse().source("live-a")
        )
        == "g-live-a"
    )


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"exactly.once.enabled": "yes"}, "exactly.once.enabled: expected true or false"),
        (
            {"exactly.once.source.support": "on"},
            "exactly.once.source.support: expected one of enabled, disabled, preparing",
        ),
        (
            {"exactly.once.enabled": "false", "exactly.once.source.support": "enabled"},
            "expected a value agreeing with exactly.once.enabled='false'",
        ),
        (
            {"exactly.once.enabled": "true", "producer.transactional.id": "mine"},
            "producer.transactional.id: expected it unset with exactly.once.enabled",
        ),
        (
            {"exactly.once.enabled": "true", "target.transactional.id": "mine"},
            "target.transactional.id: expected it unset",
        ),
    ],
)
def test_exactly_once_errors(keys: dict[str, str], message: str) -> None:
    with pytest.raises(MirrorConfigError, match=message):
        with_keys(keys)


def test_a_misspelt_key_is_refused_with_the_nearest_one() -> None:
    with pytest.raises(MirrorConfigError, match=r"batch\.max\.mesages: .*did you mean "
                       r"'batch\.max\.messages'\?"):  # fmt: skip
        MirrorConfig.from_properties({**BASE, "batch.max.mesages": "10"})
