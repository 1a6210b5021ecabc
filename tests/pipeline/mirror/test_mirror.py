"""The mirror end to end: real broker processes for a live and an offline cluster (two
ZooKeeper chroots), real confluent-kafka clients, the mirror in-process or as ``sluice mirror``
processes killed the hard way. What is checked is what an operator would check: the offline
copy of every record, found by its lineage header."""

from __future__ import annotations

import time
import uuid
import warnings
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from sluice.cli import main as sluice_main
from sluice.pipeline.lineage import LINEAGE_HEADER
from sluice.pipeline.mirror.config import MirrorConfig
from sluice.pipeline.mirror.mirror import DeliveryError, Mirror, mirror_lag
from sluice.testing.cluster import QUIET, BrokerCluster
from sluice.testing.mirror import MirrorProcess, write_properties
from sluice.testing.net import free_port, wait_until
from sluice.testing.prometheus import samples_named, scrape
from sluice.testing.zookeeper import ZooKeeperServer, make_chroots, new_chroot
from tests.pipeline.mirror_fixture import (
    CLUSTER_SETTINGS,
    Traffic,
    mirror_properties,
    origins,
    produce,
)
from tests.pipeline.topic_reader import Record, read_all

with warnings.catch_warnings():
    # kafka-python loads its JSON schemas with deprecated importlib.resources calls.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import murmur2  # kafka-python's port of Java's murmur2

pytestmark = pytest.mark.broker

ONE_BROKER = {**CLUSTER_SETTINGS, "default.replication.factor": "1"}


@pytest.fixture(scope="module")
def zk_module_connect(zookeeper: ZooKeeperServer) -> str:
    """A chroot of this module's own (the clusters below outlive one test)."""
    return zookeeper.connect_string + new_chroot(zookeeper, "sluice-mirror")


@pytest.fixture(scope="module")
def datacenters(
    zk_module_connect: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BrokerCluster, BrokerCluster]]:
    """A one-broker live cluster and a one-broker offline cluster, for the whole module."""
    base = tmp_path_factory.mktemp("datacenters")
    live_zk, offline_zk = make_chroots(zk_module_connect, "live", "offline")
    live = BrokerCluster(base / "live", live_zk, size=1, overrides=ONE_BROKER)
    offline = BrokerCluster(base / "offline", offline_zk, size=1, overrides=ONE_BROKER)
    try:
        live.start()
        offline.start()
        yield live, offline
    finally:
        live.stop()
        offline.stop()


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


def create(bootstrap: str, topic: str, partitions: int, replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, partitions, replication)])[topic].result(timeout=30)
    wait_until(
        lambda: len(admin.list_topics(topic, timeout=5).topics[topic].partitions) == partitions,
        30,
        f"{topic} with {partitions} partitions",
    )


def end_offsets(bootstrap: str, topic: str) -> int:
    """The sum of the topic's high watermarks (0 while it does not exist or has no leaders)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends", **QUIET})
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return 0
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in metadata.partitions
        )
    except KafkaException:
        return 0
    finally:
        consumer.close()


def partition_count(bootstrap: str, topic: str) -> int | None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    metadata = admin.list_topics(timeout=10).topics.get(topic)
    return None if metadata is None or metadata.error is not None else len(metadata.partitions)


@contextmanager
def mirror_in_process(props: Mapping[str, str]) -> Iterator[Mirror]:
    """A :class:`Mirror` on threads of this process; stopped cleanly (exit status 0)."""
    mirror = Mirror(MirrorConfig.from_properties(props)).start()
    try:
        yield mirror
    finally:
        mirror.stop()
        assert mirror.wait(60) == 0, f"the mirror failed: {mirror.errors}"


def wait_mirrored(
    offline: str, topic: str, expected: set[tuple[str, str, int, int]], timeout: float = 60
) -> list[Record]:
    """The target topic's records once their origins include ``expected``."""

    def check() -> list[Record] | None:
        if end_offsets(offline, topic) < len(expected):
            return None
        records = read_all(offline, topic)
        return records if expected <= set(origins(records)) else None

    result: list[Record] = wait_until(check, timeout, f"{len(expected)} origins in {topic}")
    return result


# -- what a copy is --------------------------------------------------------------------------


def test_records_are_copied_with_their_partition_key_value_timestamp_headers_and_lineage(
    datacenters: tuple[BrokerCluster, BrokerCluster],
) -> None:
    live, offline = datacenters
    prefix = unique("copy")
    topic, skipped, later = f"{prefix}-a", f"{prefix}-skip", f"{prefix}-later"
    create(live.bootstrap, topic, 3)
    create(live.bootstrap, skipped, 1)
    # Explicit create times, recent enough for the brokers' time-based retention.
    an_hour_ago = int(time.time() * 1000) - 3_600_000
    sent = [
        {
            "partition": i % 3,
            "key": None if i % 5 == 0 else f"key-{i}".encode(),
            "value": None if i % 7 == 0 else f"value-{i}".encode() * (i % 4 + 1),
            "timestamp": an_hour_ago + i,
            "headers": [("h", f"{i}".encode()), ("empty", None)] if i % 2 else None,
        }
        for i in range(60)
    ]
    # Already mirrored once (archive → live): the origin must stay the first one.
    sent += [
        {"partition": 1, "key": b"old", "value": b"v", "headers": [(LINEAGE_HEADER, b"edge/t/4/9")]}
    ]
    produce(live.bootstrap, topic, sent)
    produce(live.bootstrap, skipped, [{"value": b"not mirrored"}])
    source = read_all(live.bootstrap, topic)
    props = mirror_properties(
        live.bootstrap, offline.bootstrap, f"{prefix}-.*", unique("group"),
        **{"topics.exclude": f"{prefix}-sk.*"},
    )  # fmt: skip
    with mirror_in_process(props):
        expected = {("live", topic, r.partition, r.offset) for r in source if r.key != b"old"}
        expected.add(("edge", "t", 4, 9))
        copies = wait_mirrored(offline.bootstrap, topic, expected)
        # A topic that appears while the mirror runs is picked up at the next refresh.
        create(live.bootstrap, later, 2)
        produce(live.bootstrap, later, [{"partition": i % 2, "value": b"x"} for i in range(10)])
        later_copies = wait_mirrored(
            offline.bootstrap, later, {("live", later, i % 2, i // 2) for i in range(10)}
        )
    assert partition_count(offline.bootstrap, topic) == 3  # created like the source
    assert partition_count(offline.bootstrap, later) == 2
    assert partition_count(offline.bootstrap, skipped) is None  # excluded: never created
    assert len(copies) == len(source) and len(later_copies) == 10
    for original, copy in zip(source, copies, strict=True):
        # Same partition count: same partition, and (a fresh topic) the same offsets.
        assert (copy.partition, copy.offset) == (original.partition, original.offset)
        assert (copy.key, copy.value, copy.timestamp) == (
            original.key,
            original.value,
            original.timestamp,
        )
        if original.key == b"old":
            assert copy.headers == original.headers  # the lineage it had is kept as is
        else:
            lineage = f"live/{topic}/{original.partition}/{original.offset}".encode()
            assert copy.headers == (*original.headers, (LINEAGE_HEADER, lineage))


def test_key_hash_partitioning_when_the_target_has_other_partition_counts(
    datacenters: tuple[BrokerCluster, BrokerCluster],
) -> None:
    live, offline = datacenters
    topic = unique("rehash")
    create(live.bootstrap, topic, 2)
    create(offline.bootstrap, topic, 5)  # pre-created with another count: kept as it is
    produce(
        live.bootstrap,
        topic,
        [{"partition": i % 2, "key": f"user-{i}".encode(), "value": b"v"} for i in range(80)]
        + [{"partition": 0, "key": None, "value": b"no key"} for _ in range(5)],
    )
    source = read_all(live.bootstrap, topic)
    props = mirror_properties(live.bootstrap, offline.bootstrap, topic, unique("group"))
    with mirror_in_process(props):
        copies = wait_mirrored(
            offline.bootstrap, topic, {("live", topic, r.partition, r.offset) for r in source}
        )
    assert partition_count(offline.bootstrap, topic) == 5
    assert len(copies) == len(source)
    keyed = [c for c in copies if c.key is not None]
    assert len(keyed) == 80
    for copy in keyed:  # Java Kafka's default partitioner: toPositive(murmur2(key)) % 5
        assert copy.partition == (murmur2(copy.key) & 0x7FFFFFFF) % 5, copy.key
    assert len({c.partition for c in keyed}) > 2  # spread beyond the source's two


def test_two_source_clusters_mirror_into_one_target_topic(
    datacenters: tuple[BrokerCluster, BrokerCluster],
    zk_module_connect: str,
    tmp_path: Path,
) -> None:
    live, offline = datacenters
    (live_b_zk,) = make_chroots(zk_module_connect, unique("live-b"))
    topic = unique("merged")
    with BrokerCluster(tmp_path / "live-b", live_b_zk, size=1, overrides=ONE_BROKER) as live_b:
        expected = set()
        for alias, cluster in (("live", live), ("live-b", live_b)):
            create(cluster.bootstrap, topic, 2)
            sent = [{"partition": i % 2, "value": alias.encode()} for i in range(30)]
            expected |= {(alias, topic, m.partition(), m.offset())
                         for m in produce(cluster.bootstrap, topic, sent)}  # fmt: skip
        port = free_port()
        props = {
            **mirror_properties(live.bootstrap, offline.bootstrap, topic, unique("group")),
            "clusters": "live,live-b",
            "live-b.bootstrap.servers": live_b.bootstrap,
            "metrics.listener": f"http://127.0.0.1:{port}",
        }
        with mirror_in_process(props) as mirror:
            assert [loop.alias for loop in mirror.loops] == ["live", "live-b"]
            copies = wait_mirrored(offline.bootstrap, topic, expected)
            records = samples_named(scrape(port), "sluice_mirror_records_total", topic=topic)
    assert partition_count(offline.bootstrap, topic) == 2  # one loop created it, one found it
    assert sorted(origins(copies)) == sorted(expected)  # no duplicates either
    assert {dict(labels)["source"]: n for labels, n in records.items()} == {
        "live": 30,
        "live-b": 30,
    }
    for copy in copies:  # each cluster's records in their own partition, values from there
        assert copy.lineage is not None
        assert copy.partition == copy.lineage.partition
        assert copy.value == copy.lineage.cluster.encode()


# -- what MirrorMaker 2 keeps alike: topic configs and partition counts ----------------------


def topic_overrides(bootstrap: str, topic: str) -> dict[str, str]:
    """The topic's own configs (DescribeConfigs source DYNAMIC_TOPIC_CONFIG); {} if unknown."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    resource = ConfigResource("topic", topic)
    try:
        entries = admin.describe_configs([resource])[resource].result(timeout=10)
    except KafkaException:
        return {}
    return {
        name: e.value
        for name, e in entries.items()
        if ConfigSource(e.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG
    }


def alter_topic(bootstrap: str, topic: str, configs: Mapping[str, str | None]) -> None:
    """IncrementalAlterConfigs: SET each config to its value, DELETE it on None."""
    entries = [
        ConfigEntry(
            name,
            value,
            incremental_operation=(
                AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
            ),
        )
        for name, value in configs.items()
    ]
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    resource = ConfigResource("topic", topic, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)


def test_topic_configs_are_copied_and_an_altered_config_is_synced(
    datacenters: tuple[BrokerCluster, BrokerCluster],
) -> None:
    live, offline = datacenters
    topic = unique("configs")
    admin = AdminClient({"bootstrap.servers": live.bootstrap, **QUIET})
    configs = {"retention.ms": "3600000", "unclean.leader.election.enable": "true"}
    admin.create_topics([NewTopic(topic, 2, 1, config=configs)])[topic].result(timeout=30)
    sent = produce(live.bootstrap, topic, [{"partition": i % 2, "value": b"v"} for i in range(10)])
    props = mirror_properties(
        live.bootstrap, offline.bootstrap, topic, unique("group"),
        **{"sync.topic.configs.interval.seconds": "1"},
    )  # fmt: skip
    with mirror_in_process(props):
        wait_mirrored(
            offline.bootstrap, topic, {("live", topic, m.partition(), m.offset()) for m in sent}
        )
        # Created with the source's configs, minus MirrorMaker 2's excluded ones.
        assert topic_overrides(offline.bootstrap, topic) == {"retention.ms": "3600000"}
        alter_topic(
            live.bootstrap,
            topic,
            {
                "retention.ms": "7200000",
                "max.message.bytes": "2000000",
                "min.insync.replicas": "1",  # excluded: never copied
            },
        )
        expected = {"retention.ms": "7200000", "max.message.bytes": "2000000"}
        wait_until(
            lambda: topic_overrides(offline.bootstrap, topic) == expected,
            30,
            f"the altered configs at the target: {expected}",
        )
        alter_topic(live.bootstrap, topic, {"retention.ms": None})  # back to the default
        wait_until(
            lambda: topic_overrides(offline.bootstrap, topic) == {"max.message.bytes": "2000000"},
            30,
            "retention.ms back to the target's default",
        )


def test_partitions_added_at_the_source_are_added_at_the_target_and_copied(
    datacenters: tuple[BrokerCluster, BrokerCluster],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    live, offline = datacenters
    topic = unique("grown")
    create(live.bootstrap, topic, 2)
    records = [{"partition": i % 2, "key": f"k{i}".encode(), "value": b"v"} for i in range(20)]
    sent = produce(live.bootstrap, topic, records)
    port = free_port()
    props = mirror_properties(
        live.bootstrap, offline.bootstrap, topic, unique("group"),
        # librdkafka's own metadata refresh is 5 minutes away: only the mirror's refresh can
        # notice the new partitions in time.
        **{"consumer.topic.metadata.refresh.interval.ms": "300000",
           "metrics.listener": f"http://127.0.0.1:{port}"},
    )  # fmt: skip
    with mirror_in_process(props):
        expected = {("live", topic, m.partition(), m.offset()) for m in sent}
        wait_mirrored(offline.bootstrap, topic, expected)
        admin = AdminClient({"bootstrap.servers": live.bootstrap, **QUIET})
        admin.create_partitions([NewPartitions(topic, 5)])[topic].result(timeout=30)
        wait_until(lambda: partition_count(live.bootstrap, topic) == 5, 30, "5 at the source")
        records = [{"partition": i % 5, "key": f"n{i}".encode(), "value": b"v"} for i in range(50)]
        sent += produce(live.bootstrap, topic, records)
        expected = {("live", topic, m.partition(), m.offset()) for m in sent}
        copies = wait_mirrored(offline.bootstrap, topic, expected)

        def caught_up() -> bool:
            lag = samples_named(scrape(port), "sluice_mirror_lag", source="live", topic=topic)
            return len(lag) == 5 and sum(lag.values()) == 0

        wait_until(caught_up, 30, "a lag series of 0 for each of the 5 partitions")
    assert partition_count(offline.bootstrap, topic) == 5  # grown like the source
    assert sorted(origins(copies)) == sorted(expected)  # each once
    for copy in copies:  # the new partitions too keep their number
        assert copy.lineage is not None and copy.partition == copy.lineage.partition
    config = write_properties(tmp_path / "mirror.properties", props)
    capsys.readouterr()
    assert sluice_main(["mirror", "lag", "--config", str(config)]) == 0
    rows = [
        cols
        for cols in (line.split() for line in capsys.readouterr().out.splitlines())
        if len(cols) == 6 and cols[:2] == ["live", topic]
    ]
    assert [(r[2], r[3], r[5]) for r in rows] == [
        ("0", "20", "0"),
        ("1", "20", "0"),
        ("2", "10", "0"),
        ("3", "10", "0"),
        ("4", "10", "0"),
    ]


# -- lag -------------------------------------------------------------------------------------


def test_lag_metric_and_the_lag_command(
    datacenters: tuple[BrokerCluster, BrokerCluster],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    live, offline = datacenters
    prefix = unique("lag")
    topic, unseen = f"{prefix}-a", f"{prefix}-unseen"
    create(live.bootstrap, topic, 2)
    pairs = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(2000)]
    produce(
        live.bootstrap,
        topic,
        [{"partition": i % 2, "key": k, "value": v} for i, (k, v) in enumerate(pairs)],
    )
    size = sum(len(k) + len(v) for k, v in pairs)
    port = free_port()
    props = mirror_properties(
        live.bootstrap, offline.bootstrap, f"{prefix}-a", unique("group"),
        **{"batch.max.messages": "10", "metrics.listener": f"http://127.0.0.1:{port}"},
    )  # fmt: skip
    with mirror_in_process(props):

        def caught_up() -> bool:
            samples = scrape(port)
            lag = samples_named(samples, "sluice_mirror_lag", source="live", topic=topic)
            records_total = samples_named(samples, "sluice_mirror_records_total", topic=topic)
            return len(lag) == 2 and sum(lag.values()) == 0 and sum(records_total.values()) == 2000

        wait_until(caught_up, 60, "all 2000 records mirrored and lag 0 on both partitions")
        samples = scrape(port)
    assert sum(samples_named(samples, "sluice_mirror_bytes_total", topic=topic).values()) == size
    assert sum(samples_named(samples, "sluice_mirror_batches_total").values()) >= 200
    assert sum(samples_named(samples, "sluice_mirror_assigned_partitions").values()) == 2

    # Stopped: the group's committed offsets stay; the sources move on.
    produce(live.bootstrap, topic, [{"partition": 0, "value": b"x"}] * 7)
    produce(live.bootstrap, topic, [{"partition": 1, "value": b"x"}] * 5)
    create(live.bootstrap, unseen, 1)
    produce(live.bootstrap, unseen, [{"value": b"x"}] * 3)
    props["topics"] = f"{prefix}-.*"
    config = write_properties(tmp_path / "mirror.properties", props)
    capsys.readouterr()
    assert sluice_main(["mirror", "lag", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    rows = {
        (cols[1], cols[2]): cols
        for cols in (line.split() for line in out.splitlines())
        if len(cols) == 6 and cols[0] == "live"
    }
    assert out.splitlines()[0].split() == [
        "CLUSTER",
        "TOPIC",
        "PARTITION",
        "COMMITTED",
        "END",
        "LAG",
    ]
    assert rows[(topic, "0")][3:] == ["1000", "1007", "7"]
    assert rows[(topic, "1")][3:] == ["1000", "1005", "5"]
    assert rows[(unseen, "0")][3:] == ["-", "3", "3"]  # never committed: from the log start
    assert "total lag: 15" in out


def test_a_refused_delivery_is_never_committed_past_and_shows_as_lag(
    datacenters: tuple[BrokerCluster, BrokerCluster],
) -> None:
    live, offline = datacenters
    topic = unique("refused")
    create(live.bootstrap, topic, 2)
    # One replica can never satisfy min.insync.replicas=2: every acks=all write is refused
    # (NOT_ENOUGH_REPLICAS, retried by librdkafka until message.timeout.ms).
    admin = AdminClient({"bootstrap.servers": offline.bootstrap, **QUIET})
    new = NewTopic(topic, 2, 1, config={"min.insync.replicas": "2"})
    admin.create_topics([new])[topic].result(timeout=30)
    # Partition 1 first: its batch stalls. Partition 0's records arrive while the loop waits
    # for that batch's acknowledgements, and must show as lag all the same.
    produce(live.bootstrap, topic, [{"partition": 1, "value": b"v"}] * 20)
    port = free_port()
    props = mirror_properties(
        live.bootstrap, offline.bootstrap, topic, unique("group"),
        # Long enough that the lag gauge (refreshed on the loop's own schedule) is scraped
        # before the loop gives up, even on a loaded machine.
        **{"producer.message.timeout.ms": "15000",
           "metrics.listener": f"http://127.0.0.1:{port}"},
    )  # fmt: skip
    config = MirrorConfig.from_properties(props)
    mirror = Mirror(config).start()
    try:

        def lags() -> dict[str, float]:
            found = samples_named(scrape(port), "sluice_mirror_lag", topic=topic)
            return {dict(labels)["partition"]: value for labels, value in found.items()}

        wait_until(lambda: lags().get("1") == 20, 60, "lag 20 on the stalled partition 1")
        produce(live.bootstrap, topic, [{"partition": 0, "value": b"v"}] * 20)
        wait_until(
            lambda: lags() == {"0": 20, "1": 20}, 60, "lag 20 on both partitions while stalled"
        )
        assert mirror.wait(90) == 1  # the loop gave up: the process would exit 1
    finally:
        mirror.stop()
        mirror.wait(60)
    error = mirror.errors["live"]
    assert isinstance(error, DeliveryError), error
    assert "nothing of the batch was committed" in str(error)
    assert f"live/{topic}/" in str(error)  # names a record by its source position
    rows = [r for r in mirror_lag(config) if r.topic == topic]
    assert [(r.partition, r.committed, r.lag) for r in rows] == [(0, None, 20), (1, None, 20)]


# -- processes sharing the work, dying and failing over ---------------------------------------


def test_two_mirror_processes_share_the_partitions_and_lose_nothing(
    datacenters: tuple[BrokerCluster, BrokerCluster], tmp_path: Path
) -> None:
    live, offline = datacenters
    topic = unique("shared")
    create(live.bootstrap, topic, 6)
    props = mirror_properties(live.bootstrap, offline.bootstrap, topic, unique("group"))
    traffic = Traffic(live.bootstrap, topic, 6, rate_per_s=300)
    a = MirrorProcess(tmp_path, props, "mirror-a")
    b = MirrorProcess(tmp_path, props, "mirror-b")
    try:
        traffic.start()
        a.start()
        b.start()

        def assigned(m: MirrorProcess) -> float:
            return sum(samples_named(m.metrics(), "sluice_mirror_assigned_partitions").values())

        def shared() -> bool:
            return assigned(a) > 0 and assigned(b) > 0 and assigned(a) + assigned(b) == 6

        wait_until(shared, 60, "both processes owning partitions, 6 in all")

        def mirrored(m: MirrorProcess) -> float:
            return sum(samples_named(m.metrics(), "sluice_mirror_records_total").values())

        wait_until(lambda: mirrored(a) > 0 and mirrored(b) > 0, 30, "both processes mirroring")
        wait_until(lambda: len(traffic.acked) >= 1000, 30, "1000 records of traffic")
        acked = traffic.finish()
        assert not traffic.errors, traffic.errors[:3]
        copies = wait_mirrored(offline.bootstrap, topic, {("live", topic, p, o) for p, o in acked})
        assert a.stop() == 0, a.output_tail()
        assert b.stop() == 0, b.output_tail()
    finally:
        traffic.finish()
        a.kill()
        b.kill()
    assert set(origins(copies)) == {("live", topic, p, o) for p, o in acked}


def duplicates(records: list[Record]) -> int:
    return sum(n - 1 for n in Counter(origins(records)).values())


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_mirror_killed_mid_traffic_and_restarted_loses_nothing(
    datacenters: tuple[BrokerCluster, BrokerCluster], tmp_path: Path
) -> None:
    live, offline = datacenters
    topic = unique("killed")
    create(live.bootstrap, topic, 4)
    batch = 100
    props = mirror_properties(
        live.bootstrap, offline.bootstrap, topic, unique("group"),
        **{"batch.max.messages": str(batch)},
    )  # fmt: skip
    # A backlog keeps the mirror busy with full batches (produce, wait, commit) when it is
    # killed; live traffic goes on through the kill and the restart.
    backlog = produce(
        live.bootstrap, topic, [{"partition": i % 4, "value": b"old"} for i in range(12000)]
    )
    expected = {("live", topic, m.partition(), m.offset()) for m in backlog}
    traffic = Traffic(live.bootstrap, topic, 4, rate_per_s=500)
    first = MirrorProcess(tmp_path, props, "first")
    second = MirrorProcess(tmp_path, props, "second")
    try:
        traffic.start()
        first.start()
        wait_until(lambda: end_offsets(offline.bootstrap, topic) >= 1000, 60, "1000 mirrored")
        assert first.kill() == -9
        killed_at = end_offsets(offline.bootstrap, topic)
        assert killed_at < len(backlog), "the mirror caught up before the kill"
        wait_until(lambda: len(traffic.acked) >= 500, 30, "traffic after the kill")
        second.start()
        wait_until(
            lambda: sum(samples_named(second.metrics(), "sluice_mirror_records_total").values()),
            60,
            "the restarted mirror mirroring",
        )
        acked = traffic.finish()
        assert not traffic.errors, traffic.errors[:3]
        expected |= {("live", topic, p, o) for p, o in acked}
        copies = wait_mirrored(offline.bootstrap, topic, expected)
        assert second.stop() == 0, second.output_tail()
    finally:
        traffic.finish()
        first.kill()
        second.kill()
    assert set(origins(copies)) == expected
    # The documented bound: one uncommitted batch per source-cluster loop of the killed process.
    assert duplicates(copies) <= batch * 1, duplicates(copies)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_source_leader_failing_over_loses_nothing(
    datacenters: tuple[BrokerCluster, BrokerCluster],
    zk_module_connect: str,
    tmp_path: Path,
) -> None:
    _, offline = datacenters
    (live_zk,) = make_chroots(zk_module_connect, unique("live3"))
    topic = unique("failover")
    settings = {**CLUSTER_SETTINGS, "default.replication.factor": "3", "min.insync.replicas": "2"}
    with BrokerCluster(tmp_path / "live3", live_zk, size=3, overrides=settings) as live:
        live.create_topic(topic, partitions=3, replication_factor=3,
                          config={"min.insync.replicas": "2"})  # fmt: skip
        group = unique("group")
        props = mirror_properties(live.bootstrap, offline.bootstrap, topic, group)
        traffic = Traffic(live.bootstrap, topic, 3, rate_per_s=300)
        mirror = MirrorProcess(tmp_path, props)
        try:
            traffic.start()
            mirror.start()
            wait_until(lambda: end_offsets(offline.bootstrap, topic) >= 300, 60, "300 mirrored")
            # The harder case when there is one: the partition leader that also coordinates
            # the mirror's group, so commits must find the new coordinator too.
            coordinator = (
                live.admin().describe_consumer_groups([group])[group].result(30).coordinator.id
            )
            leaders = {p: live.partition(topic, p).leader for p in range(3)}
            partition = next((p for p, b in leaders.items() if b == coordinator), 0)
            leader = leaders[partition]
            live.kill(leader)
            live.wait_leader(topic, partition, not_in={leader}, timeout=60)
            before = len(traffic.acked)
            wait_until(lambda: len(traffic.acked) >= before + 300, 60, "traffic after failover")
            acked = traffic.finish()
            assert not traffic.errors, traffic.errors[:3]
            copies = wait_mirrored(
                offline.bootstrap, topic, {("live", topic, p, o) for p, o in acked}, timeout=90
            )
            assert mirror.running, mirror.output_tail()
            assert mirror.stop() == 0, mirror.output_tail()
        finally:
            traffic.finish()
            mirror.kill()
    assert {("live", topic, p, o) for p, o in acked} <= set(origins(copies))
    assert {p for p, _ in acked} == {0, 1, 2}
