"""Faults for a running cluster, each one an object with ``inject()`` and ``heal()``, and a
``FaultLog`` of what was injected when — for the fault tests and the soak (``bench.soak``).

==================  ===============================================  ========================
kind                inject                                           heal
==================  ===============================================  ========================
leader-kill         SIGKILL the leader of a partition                start it again
follower-kill       SIGKILL a follower of a partition                start it again
controller-kill     SIGKILL the controller                           start it again
zookeeper-restart   SIGKILL ZooKeeper                                start it (same data)
session-expiry      SIGSTOP a broker (held past the ZooKeeper        SIGCONT
                    session timeout by the caller)
partition           cut a broker from its peers and ZooKeeper        remove the cut
                    (``NetworkLab``: packets dropped silently; the
                    test client still reaches it)
slow-disk           every fsync in a broker's log dir waits          fsyncs prompt again
                    ``delay_s`` first (``sluice.testing.slow_disk``:
                    a FUSE passthrough mounted over the log dir)
==================  ===============================================  ========================

``slow-disk`` is a real slow disk as the broker sees it: its appends and reads go through the
page cache as usual, and every ``fsync`` (of a segment, an index, a checkpoint, a directory)
blocks for the delay before the real fsync — what a saturated or failing device does to a
process. The broker's log dir must have been mounted as a :class:`SlowDisk` before it started.

Every fault heals idempotently, and :meth:`FaultLog.heal_all` heals whatever is still injected
(a paused broker is always sent SIGCONT, a cut always removed): a failed test leaves nothing
stopped or cut.

:func:`direct_produce` appends one record by asking one broker directly — bypassing client
metadata — to see whether a (possibly deposed) leader still accepts ``acks=all`` writes.

Not thread-safe: one thread injects and heals.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from typing import Any

from sluice.broker.log.records import encode_batch
from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.apis import request_type
from sluice.broker.protocol.build import build
from sluice.testing.broker import BrokerProcess
from sluice.testing.netns import LabBroker, LabCluster, PartitionView, call_broker
from sluice.testing.slow_disk import SlowDisk
from sluice.testing.zookeeper import ZooKeeperServer

KINDS = (
    "leader-kill",
    "follower-kill",
    "controller-kill",
    "zookeeper-restart",
    "session-expiry",
    "partition",
    "slow-disk",
)


class FaultTargetError(RuntimeError):
    """A fault could not find its target (no live leader, follower or controller)."""


def _signal(broker: BrokerProcess, sig: int) -> None:
    pid = broker.pid
    if pid is not None and broker.running:
        os.kill(pid, sig)


@dataclass
class Fault:
    """One fault: ``kind`` (see the module table), ``target`` (e.g. ``broker 2``), and the
    seconds since the log's start when it was injected and healed."""

    kind: str
    target: str
    injected_at: float = 0.0
    healed_at: float | None = None
    note: str = ""

    def inject(self) -> None:
        raise NotImplementedError

    def heal(self) -> None:
        raise NotImplementedError

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "target": self.target,
            "injected_at": round(self.injected_at, 3),
            "healed_at": None if self.healed_at is None else round(self.healed_at, 3),
            "note": self.note,
        }


@dataclass
class BrokerKill(Fault):
    """SIGKILL a broker; heal starts it again on the same address and log dir."""

    broker: BrokerProcess | None = None

    def inject(self) -> None:
        assert self.broker is not None
        self.broker.kill()

    def heal(self) -> None:
        assert self.broker is not None
        if not self.broker.running:
            self.broker.start()


@dataclass
class ZooKeeperRestart(Fault):
    """SIGKILL ZooKeeper; heal starts it again (same port, same data dir)."""

    zookeeper: ZooKeeperServer | None = None

    def inject(self) -> None:
        assert self.zookeeper is not None
        self.zookeeper.kill()

    def heal(self) -> None:
        assert self.zookeeper is not None
        if not self.zookeeper.running:
            self.zookeeper.start()


@dataclass
class Pause(Fault):
    """SIGSTOP a broker; heal sends SIGCONT. Held past ``zookeeper.session.timeout.ms`` it
    expires the broker's ZooKeeper session (kind ``session-expiry``)."""

    broker: BrokerProcess | None = None

    def inject(self) -> None:
        assert self.broker is not None
        _signal(self.broker, signal.SIGSTOP)

    def heal(self) -> None:
        assert self.broker is not None
        _signal(self.broker, signal.SIGCONT)


@dataclass
class Cut(Fault):
    """Cut a lab broker from its peers and from ZooKeeper; heal removes the cut."""

    cluster: LabCluster | None = None
    broker_id: int = -1

    def inject(self) -> None:
        assert self.cluster is not None
        self.cluster.cut(self.broker_id)

    def heal(self) -> None:
        assert self.cluster is not None
        self.cluster.heal(self.broker_id)


@dataclass
class SlowFsync(Fault):
    """Every fsync on ``disk`` (a broker's log dir) waits ``delay_s`` until healed."""

    disk: SlowDisk | None = None
    delay_s: float = 0.5

    def inject(self) -> None:
        assert self.disk is not None
        self.disk.set_delay(self.delay_s)

    def heal(self) -> None:
        if self.disk is not None:
            self.disk.set_delay(0.0)


class FaultLog:
    """Faults in the order injected, with times in seconds since ``start`` (monotonic)."""

    def __init__(self, start: float | None = None) -> None:
        self.start = time.monotonic() if start is None else start
        self.faults: list[Fault] = []

    def now(self) -> float:
        return time.monotonic() - self.start

    def inject(self, fault: Fault) -> Fault:
        """Inject ``fault`` and record it (recorded first: a failed injection is healed too)."""
        fault.injected_at = self.now()
        self.faults.append(fault)
        fault.inject()
        return fault

    def heal(self, fault: Fault) -> None:
        if fault.healed_at is None:
            fault.heal()
            fault.healed_at = self.now()

    def heal_all(self) -> None:
        """Heal every fault not yet healed, newest first; a heal that fails is noted on the
        fault and the others are still healed."""
        for fault in reversed(self.faults):
            try:
                self.heal(fault)
            except Exception as exc:  # heal the others whatever happened
                fault.note += f" heal failed: {exc!r}"

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(KINDS, 0)
        for f in self.faults:
            out[f.kind] = out.get(f.kind, 0) + 1
        return out


# -- targets ------------------------------------------------------------------------------


def newest_view(cluster: LabCluster, topic: str, partition: int) -> PartitionView:
    """The partition as the running broker with the newest leader epoch shows it (a cut or
    paused broker's view is stale); :class:`FaultTargetError` if no broker answers."""
    views = [v for i in cluster.running() if (v := cluster.view(i, topic, partition))]
    if not views:
        raise FaultTargetError(f"{topic}-{partition}: no running broker answered Metadata")
    return max(views, key=lambda v: v.leader_epoch)


def leader_of(cluster: LabCluster, topic: str, partition: int) -> int:
    """The partition's live leader; :class:`FaultTargetError` if none."""
    view = newest_view(cluster, topic, partition)
    if view.leader not in cluster.running():
        raise FaultTargetError(f"{topic}-{partition}: expected a live leader, found {view}")
    return view.leader


def follower_of(cluster: LabCluster, topic: str, partition: int) -> int:
    """A live in-sync follower of the partition (the lowest id)."""
    view = newest_view(cluster, topic, partition)
    live = set(cluster.running())
    followers = sorted(r for r in view.isr if r != view.leader and r in live)
    if not followers:
        raise FaultTargetError(f"{topic}-{partition}: expected a live follower, found {view}")
    return followers[0]


def direct_produce(
    broker: BrokerProcess,
    topic: str,
    partition: int,
    value: bytes,
    timeout: float = 8.0,
    *,
    acks: int = -1,
) -> int | None:
    """Append one record (``acks=all`` unless ``acks`` says otherwise) by asking ``broker``
    itself (no metadata lookup, no retries): the partition's error code (0: acknowledged), or
    None when no answer came within ``timeout`` seconds. A :class:`LabBroker` is asked on its
    namespace address, any other broker on 127.0.0.1. Thread-safe."""
    body = build(
        request_type(ApiKey.PRODUCE, 8),
        {
            "acks": acks,
            "timeout": int(timeout * 1000) // 2,
            "topic_data": [
                {
                    "name": topic,
                    "partition_data": [
                        {"index": partition, "records": encode_batch([(None, value)])}
                    ],
                }
            ],
        },
    )
    address = broker.host.address if isinstance(broker, LabBroker) else "127.0.0.1"
    response = call_broker(address, broker.port, body, timeout)
    if response is None:
        return None
    return int(response.responses[0].partition_responses[0].error_code)
