"""The paper's data path end to end, judged by the audit: audited producers on a live cluster,
the mirror into an offline cluster (killed with SIGKILL mid-traffic and restarted), and the
audit job counting both tiers per window against what the producers reported — with the
at-least-once mirror (duplicates bounded by a batch) and the exactly-once one (none: the audit
reads the offline cluster read_committed, the Spark source's default).

The audit's verdict is checked against a simple model too: the offline topic read back
record by record, its lineage origins against the live cluster's acknowledged positions.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from sluice.common.properties import load_properties
from sluice.pipeline.audit.config import AuditConfig
from sluice.pipeline.audit.producer import AuditingProducer
from sluice.pipeline.audit.run import run_audit
from sluice.pipeline.mirror.config import MirrorConfig
from sluice.pipeline.mirror.mirror import mirror_lag
from sluice.testing.broker import create_topic
from sluice.testing.mirror import MirrorProcess
from sluice.testing.net import wait_until
from tests.pipeline.broker_fixture import SluiceBroker
from tests.pipeline.mirror.target_reader import origins, read_target
from tests.pipeline.mirror_fixture import Traffic, mirror_properties

pytestmark = [pytest.mark.broker, pytest.mark.slow]

WINDOW_MS = 2000
PARTITIONS = 4
BATCH = 150  # the mirror's batch.max.messages: the bound on duplicates per death
QUICK_GROUPS = {"group.initial.rebalance.delay.ms": "100"}


class AuditedTraffic(Traffic):
    """One front-end server: :class:`Traffic` through an :class:`AuditingProducer` (keys
    spread by the partitioner), closed at :meth:`finish` so every window is reported."""

    def __init__(self, bootstrap: str, registry: str, topic: str, audit_topic: str) -> None:
        producer = AuditingProducer(
            {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
             "linger.ms": 5, "log_level": 0},
            registry_url=registry, server="fe-test", audit_topic=audit_topic, window_ms=WINDOW_MS,
        )  # fmt: skip
        super().__init__(bootstrap, topic, PARTITIONS, rate_per_s=500.0, producer=producer)

    def _send(self, n: int) -> None:
        self.producer.produce(
            self.topic, f"view-{n}".encode(), key=f"user-{n % 31}".encode(),
            on_delivery=self._report,
        )  # fmt: skip

    def _drain(self, timeout: float) -> None:
        self.producer.close(timeout)  # flushes, and reports every window, the last partial one


@pytest.mark.timeout(300)
@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_mirror_killed_mid_traffic_the_audit_shows_no_loss_and_bounded_duplicates(
    tmp_path: Path, spark: Any, registry_url: str, exactly_once: bool
) -> None:
    live = SluiceBroker(tmp_path / "live", QUICK_GROUPS).start()
    offline = SluiceBroker(tmp_path / "offline", QUICK_GROUPS).start()
    mirror: MirrorProcess | None = None
    try:
        topic, audit_topic = f"views-{uuid.uuid4().hex[:8]}", "sluice-audit"
        create_topic(live.bootstrap, topic, PARTITIONS)
        create_topic(live.bootstrap, audit_topic, 1)
        props = mirror_properties(
            live.bootstrap, offline.bootstrap, topic, f"mirror-{topic}",
            **{"batch.max.messages": str(BATCH), "exactly.once.enabled": str(exactly_once)},
        )  # fmt: skip
        mirror = MirrorProcess(tmp_path / "mirror", props).start()
        traffic = AuditedTraffic(live.bootstrap, registry_url, topic, audit_topic)
        traffic.start()

        # Kill the mirror once it has copied (and committed) a good part, while traffic flows.
        config = MirrorConfig.from_properties(load_properties(str(mirror.config), []))

        def committed() -> int:
            return sum(row.committed or 0 for row in mirror_lag(config) if row.topic == topic)

        wait_until(lambda: committed() >= 1500, 60, "the mirror to commit 1,500 records")
        assert mirror.kill() is not None
        time.sleep(1.0)  # traffic goes on while no mirror runs
        mirror.start()
        time.sleep(2.0)
        acked = traffic.finish()
        assert not traffic.errors, traffic.errors[:3]

        wait_until(
            lambda: (
                all(row.lag == 0 for row in mirror_lag(config) if row.topic == topic)
                and len(read_target(offline.bootstrap, topic)) >= len(acked)
            ),
            90,
            "the restarted mirror to catch up",
        )
        stopped_ms = int(time.time() * 1000)

        audit = AuditConfig.from_properties({
            "audit.topic": audit_topic,
            "window.ms": str(WINDOW_MS),
            "topics": topic,
            "tiers": "live,offline",
            "live.clusters": "live",
            "live.bootstrap.servers": live.bootstrap,
            "offline.alias": "offline",
            "offline.bootstrap.servers": offline.bootstrap,
            "schema.registry.url": registry_url,
            "report.dir": str(tmp_path / "audit"),
        })  # fmt: skip
        # Every window closed: the last one ends within WINDOW_MS of now, plus its grace.
        result = run_audit(
            audit, spark, until_ms=stopped_ms + 2 * WINDOW_MS + 1, print_report=False
        )
        copies = origins(read_target(offline.bootstrap, topic))
    finally:
        if mirror is not None and mirror.running:
            mirror.stop()
        offline.stop()
        live.stop()

    # The audit: no window differs, every window closed, the producers' total is what was acked.
    assert result.exit_status == 0, result.mismatches
    assert result.windows and all(w.closed for w in result.windows)
    assert sum(w.tiers["producers"].count for w in result.windows) == len(acked)
    offline_tiers = [w.tiers["offline"] for w in result.windows]
    assert all(t.distinct == t.expected for t in offline_tiers)
    duplicates = sum(t.count - t.distinct for t in offline_tiers)
    assert 0 <= duplicates <= (0 if exactly_once else BATCH)

    # The model: the offline topic's lineage origins are exactly the acked live positions, and
    # the copies beyond one per origin are the duplicates the audit counted.
    assert set(copies) == {("live", topic, p, o) for p, o in acked}
    assert sum(copies.values()) - len(copies) == duplicates
