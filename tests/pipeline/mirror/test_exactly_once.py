"""The exactly-once mirror end to end (``exactly.once.enabled=true``): standalone Sluice brokers
for the live and the offline cluster, the mirror in-process or as ``sluice mirror`` processes
killed (SIGKILL) or frozen (SIGSTOP) the hard way. The target is read back read_committed, as
the nightly load reads it: every source record must be there exactly once, by lineage.

Cluster-mode targets (markers to partitions led by other brokers) are not covered here: the
mirror works against any target whose transactions work; these tests use standalone brokers.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, IsolationLevel, KafkaError, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    NewTopic,
    OffsetSpec,
)

from sluice.cli import main as sluice_main
from sluice.pipeline.mirror.config import MirrorConfig
from sluice.pipeline.mirror.mirror import DeliveryError, Mirror, mirror_lag
from sluice.pipeline.mirror.offset_store import decode_record
from sluice.testing.cluster import QUIET
from sluice.testing.mirror import MirrorProcess, write_properties
from sluice.testing.net import wait_until
from sluice.testing.prometheus import samples_named
from tests.broker.server.clients import txn_producer
from tests.pipeline.broker_fixture import SluiceBroker
from tests.pipeline.mirror.target_reader import Copy, Origin, origins, read_target
from tests.pipeline.mirror_fixture import Traffic, mirror_properties, produce

pytestmark = pytest.mark.broker

QUICK_GROUPS = {"group.initial.rebalance.delay.ms": "100"}


@pytest.fixture(scope="module")
def datacenters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A standalone live broker and a standalone offline broker: their bootstrap addresses."""
    base = tmp_path_factory.mktemp("eos-datacenters")
    live = SluiceBroker(base / "live", QUICK_GROUPS)
    offline = SluiceBroker(base / "offline", QUICK_GROUPS)
    try:
        live.start()
        offline.start()
        yield live.bootstrap, offline.bootstrap
    finally:
        live.stop()
        offline.stop()


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


def create(bootstrap: str, topic: str, partitions: int, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(timeout=30)
    wait_until(
        lambda: len(admin.list_topics(topic, timeout=5).topics[topic].partitions) == partitions,
        30,
        f"{topic} with {partitions} partitions",
    )


def eos_properties(live: str, offline: str, topic: str, **extra: str) -> dict[str, str]:
    return mirror_properties(
        live, offline, topic, unique("group"), **{"exactly.once.enabled": "true", **extra}
    )


def wait_copied(offline: str, topic: str, expected: set[Origin], timeout: float = 90) -> list[Copy]:
    """The target's read_committed records once every expected origin is among them."""

    def check() -> list[Copy] | None:
        copies = read_target(offline, topic)
        return copies if expected <= set(origins(copies)) else None

    found: list[Copy] = wait_until(check, timeout, f"{len(expected)} origins in {topic}")
    return found


def stored_positions(offline: str, group: str, alias: str = "live") -> dict[tuple[str, int], int]:
    """The offsets topic read back (read_committed), through the store's own decoding."""
    consumer = Consumer(
        {
            "bootstrap.servers": offline,
            "group.id": "eos-offsets",
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            **QUIET,
        }
    )
    positions: dict[tuple[str, int], int] = {}
    try:
        consumer.assign([TopicPartition(f"mm2-offsets.{alias}.internal", 0, -2)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        return positions
                    continue
                found = decode_record(msg.key(), msg.value(), group, alias, "test")
                if found is not None and found[1] is not None:
                    positions[found[0]] = found[1]
        raise AssertionError("the offsets topic was not read to its end")
    finally:
        consumer.close()


@contextmanager
def mirror_in_process(props: Mapping[str, str]) -> Iterator[Mirror]:
    mirror = Mirror(MirrorConfig.from_properties(props)).start()
    try:
        yield mirror
    finally:
        mirror.stop()
        assert mirror.wait(60) == 0, f"the mirror failed: {mirror.errors}"


def transaction_open(admin: AdminClient, topic: str) -> bool:
    """Whether some partition of ``topic`` has a last stable offset below its high watermark
    (records of a transaction not yet decided), asked through ``admin``."""
    partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions

    def ends(level: Any) -> dict[int, int]:
        wanted = {TopicPartition(topic, p): OffsetSpec.latest() for p in partitions}
        futures = admin.list_offsets(wanted, isolation_level=level)
        return {tp.partition: f.result(timeout=10).offset for tp, f in futures.items()}

    stable, high = ends(IsolationLevel.READ_COMMITTED), ends(IsolationLevel.READ_UNCOMMITTED)
    return any(stable[p] < high[p] for p in partitions)


def freeze_mid_transaction(process: MirrorProcess, offline: str, topic: str) -> None:
    """SIGSTOP ``process`` at a moment its batch transaction is open (frozen, it cannot end
    it): retried until one is caught, within 60 s.

    Each try lets the mirror run 10 ms, stops it, and watches the target for up to a second:
    a batch sent just before the stop may take that long to land on a loaded machine. Giving
    up on it after 0.2 s, with 50 ms runs between tries, made the tries many and the mirror's
    progress between them large: under CI load it once copied a whole 12,000-record backlog
    before one was caught (with two busy loops beside it, 50 ms runs and this watch left
    3,200–5,500 records copied at the kill, 10 ms runs 1,000–1,400). An open transaction
    counts once seen twice 0.2 s apart: an EndTxn already in flight would close it in
    between."""
    assert process.proc is not None
    admin = AdminClient({"bootstrap.servers": offline, **QUIET})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        process.proc.send_signal(signal.SIGSTOP)
        watched_until = time.monotonic() + 1.0
        was_open = False
        while time.monotonic() < watched_until:
            time.sleep(0.2)
            is_open = transaction_open(admin, topic)
            if was_open and is_open:
                return
            was_open = is_open
        process.proc.send_signal(signal.SIGCONT)
        time.sleep(0.01)
    raise AssertionError("never caught the mirror with an open transaction")


def records_total(process: MirrorProcess) -> float:
    return sum(samples_named(process.metrics(), "sluice_mirror_records_total").values())


# -- the copy and its stored positions -----------------------------------------------------


def test_copies_once_stores_positions_in_the_target_and_resumes_there(
    datacenters: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    live, offline = datacenters
    topic = unique("eos")
    create(live, topic, 3)
    sent = produce(
        live, topic,
        [{"partition": i % 3, "key": f"k{i}".encode(), "value": f"v{i}".encode()}
         for i in range(90)],
    )  # fmt: skip
    props = eos_properties(live, offline, topic, **{"batch.max.messages": "20"})
    expected = {("live", topic, m.partition(), m.offset()) for m in sent}
    with mirror_in_process(props):
        copies = wait_copied(offline, topic, expected)
    assert origins(copies) == Counter(expected)  # each once
    for copy in copies:  # same partition count: same partition, and a fresh topic's offsets
        assert copy.partition == copy.origin[2]
    # The positions are the target's, in MirrorMaker 2's layout: the next offset per partition.
    assert stored_positions(offline, props["group.id"]) == {(topic, p): 30 for p in range(3)}

    # Stopped, the source moves on; restarted, the mirror resumes at the stored positions.
    more = produce(live, topic, [{"partition": i % 3, "value": b"more"} for i in range(30)])
    expected |= {("live", topic, m.partition(), m.offset()) for m in more}
    with mirror_in_process(props):
        copies = wait_copied(offline, topic, expected)
    assert origins(copies) == Counter(expected)
    assert stored_positions(offline, props["group.id"]) == {(topic, p): 40 for p in range(3)}
    # The source group's commits follow (informational): `sluice mirror lag` shows lag 0.
    config = write_properties(tmp_path / "mirror.properties", props)
    capsys.readouterr()
    assert sluice_main(["mirror", "lag", "--config", str(config)]) == 0
    assert "total lag: 0" in capsys.readouterr().out


def test_source_group_offsets_are_only_informational(datacenters: tuple[str, str]) -> None:
    """The target's positions win: a source group committed elsewhere is not followed."""
    live, offline = datacenters
    topic = unique("informational")
    create(live, topic, 1)
    sent = produce(live, topic, [{"value": f"v{i}".encode()} for i in range(40)])
    props = eos_properties(live, offline, topic)
    expected = {("live", topic, 0, m.offset()) for m in sent}
    with mirror_in_process(props):
        wait_copied(offline, topic, expected)
    # Someone rewinds the source group to 0: the mirror must not copy again.
    rewinder = Consumer({"bootstrap.servers": live, "group.id": props["group.id"], **QUIET})
    rewinder.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    rewinder.close()
    more = produce(live, topic, [{"value": b"after"} for _ in range(10)])
    expected |= {("live", topic, 0, m.offset()) for m in more}
    with mirror_in_process(props):
        copies = wait_copied(offline, topic, expected)
        time.sleep(1.0)  # a wrongly re-copied start would show by now
        copies = read_target(offline, topic)
    assert origins(copies) == Counter(expected)


def test_a_refused_delivery_aborts_the_transaction_and_stores_nothing(
    datacenters: tuple[str, str],
) -> None:
    live, offline = datacenters
    topic = unique("refused")
    create(live, topic, 2)
    # One replica never satisfies min.insync.replicas=2: every acks=all write is refused.
    create(offline, topic, 2, **{"min.insync.replicas": "2"})
    produce(live, topic, [{"partition": i % 2, "value": b"v"} for i in range(20)])
    props = eos_properties(
        live, offline, topic,
        **{"producer.message.timeout.ms": "4000", "producer.transaction.timeout.ms": "5000"},
    )  # fmt: skip
    config = MirrorConfig.from_properties(props)
    mirror = Mirror(config).start()
    try:
        assert mirror.wait(90) == 1  # the loop gave up: the process would exit 1
    finally:
        mirror.stop()
        mirror.wait(60)
    error = mirror.errors["live"]
    assert isinstance(error, DeliveryError), error
    assert "nothing of the batch was committed" in str(error)
    assert read_target(offline, topic) == []
    assert stored_positions(offline, props["group.id"]) == {}
    lags = [r for r in mirror_lag(config) if r.topic == topic]
    assert [(r.partition, r.committed, r.lag) for r in lags] == [(0, None, 10), (1, None, 10)]


# -- processes dying and coming back ---------------------------------------------------------


@dataclass
class TwoMirrors:
    """Two ``sluice mirror`` processes of one config over a backlog and live traffic: the
    scaffolding of the kill and the zombie tests."""

    topic: str
    first: MirrorProcess
    second: MirrorProcess
    traffic: Traffic
    expected: set[Origin]

    def copied_exactly_once(self, offline: str) -> list[Copy]:
        """Stop the traffic, wait for every acknowledged record in the target, stop the
        second mirror cleanly; the target's read_committed copies."""
        acked = self.traffic.finish()
        assert not self.traffic.errors, self.traffic.errors[:3]
        self.expected |= {("live", self.topic, p, o) for p, o in acked}
        copies = wait_copied(offline, self.topic, self.expected, timeout=120)
        assert self.second.stop() == 0, self.second.output_tail()
        return copies


@contextmanager
def two_mirrors(
    datacenters: tuple[str, str], tmp_path: Path, name: str, backlog: int, rate: int,
    names: tuple[str, str],
) -> Iterator[TwoMirrors]:  # fmt: skip
    """A 4-partition topic with ``backlog`` records (so the mirror is busy with full batches
    when a fault hits), traffic at ``rate`` records/s, and two mirror processes not yet
    started; everything is stopped, killed or resumed on the way out."""
    live, offline = datacenters
    topic = unique(name)
    create(live, topic, 4)
    props = eos_properties(live, offline, topic, **{"batch.max.messages": "100"})
    old = produce(live, topic, [{"partition": i % 4, "value": b"old"} for i in range(backlog)])
    scenario = TwoMirrors(
        topic,
        MirrorProcess(tmp_path, props, names[0]),
        MirrorProcess(tmp_path, props, names[1]),
        Traffic(live, topic, 4, rate_per_s=rate),
        {("live", topic, m.partition(), m.offset()) for m in old},
    )
    try:
        scenario.traffic.start()
        yield scenario
    finally:
        scenario.traffic.finish()
        for process in (scenario.first, scenario.second):
            if process.proc is not None and process.running:
                process.proc.send_signal(signal.SIGCONT)  # a frozen process dies on SIGKILL too
            process.kill()
        abort_open_transaction(offline, props)


def abort_open_transaction(offline: str, props: Mapping[str, str]) -> None:
    """Fence the mirror's ``transactional.id`` on the target, which aborts a transaction its
    killed or frozen process left open. A test that fails between the fault and the second
    mirror's start leaves one; it holds back the last stable offset of the offsets topic the
    module's tests share (``mm2-offsets.live.internal``) until the coordinator times it out
    (about a minute), and the next test's mirror, reading its positions read_committed,
    would wait that long."""
    config = MirrorConfig.from_properties(props)
    txn_producer(offline, config.transactional_id(config.sources[0]), **QUIET)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_mirror_killed_mid_traffic_leaves_no_duplicate_and_loses_nothing(
    datacenters: tuple[str, str], tmp_path: Path
) -> None:
    offline = datacenters[1]
    with two_mirrors(datacenters, tmp_path, "killed", 12000, 500, ("first", "second")) as run:
        backlog = len(run.expected)
        run.first.start()
        wait_until(lambda: records_total(run.first) >= 1000, 60, "1000 mirrored")
        # Killed with a batch written to the target but not committed (what the
        # non-transactional mode would duplicate).
        freeze_mid_transaction(run.first, offline, run.topic)
        assert run.first.kill() == -9
        killed_at = sum(origins(read_target(offline, run.topic)).values())
        assert killed_at < backlog, "the mirror caught up before the kill"
        wait_until(lambda: len(run.traffic.acked) >= 500, 30, "traffic after the kill")
        run.second.start()
        wait_until(lambda: records_total(run.second) > 0, 60, "the restarted mirror mirroring")
        copies = run.copied_exactly_once(offline)
    assert origins(copies) == Counter(run.expected)  # every record exactly once: 0 dup, 0 loss
    # read_uncommitted sees the killed mirror's aborted batch too, copied again since: the
    # transaction, not luck, keeps it from read_committed readers.
    uncommitted = origins(read_target(offline, run.topic, "read_uncommitted"))
    assert set(uncommitted) == set(run.expected)
    assert sum(uncommitted.values()) > len(run.expected)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_frozen_zombie_is_fenced_by_its_restarted_twin(
    datacenters: tuple[str, str], tmp_path: Path
) -> None:
    offline = datacenters[1]
    with two_mirrors(datacenters, tmp_path, "zombie", 8000, 400, ("zombie", "twin")) as run:
        zombie, twin = run.first, run.second
        zombie.start()
        wait_until(lambda: records_total(zombie) >= 500, 60, "500 mirrored")
        # Frozen mid-traffic (a long GC pause, a stalled VM): it still believes it owns its
        # partitions and may hold an open transaction.
        freeze_mid_transaction(zombie, offline, run.topic)
        assert zombie.proc is not None
        twin.start()  # fences the zombie's transactional.id at once, then waits for the group
        wait_until(lambda: records_total(twin) > 0, 60, "the twin mirroring")
        zombie.proc.send_signal(signal.SIGCONT)
        # Woken up, the zombie's next transactional call is refused: it stops, exit 1.
        wait_until(lambda: not zombie.running, 60, "the zombie to stop")
        assert zombie.proc.returncode == 1, zombie.output_tail()
        assert "fenced" in zombie.output(), zombie.output_tail()
        copies = run.copied_exactly_once(offline)
    assert origins(copies) == Counter(run.expected)
    # The zombie's open transaction was aborted by the twin's start, never committed.
    uncommitted = origins(read_target(offline, run.topic, "read_uncommitted"))
    assert sum(uncommitted.values()) > len(run.expected)
