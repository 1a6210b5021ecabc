"""The soak's checker: read every partition back from the beginning and hold the log to what
the clients recorded (``bench.soak_workload``).

Per partition, with the log as read back after all faults are healed:

* **lost**: an acknowledged message whose value is not in the log;
* **duplicated**: extra copies of a value (any produced message, acknowledged or not — the
  idempotent producer promises each at most once);
* **reordered**: acknowledged messages whose sequence is below that of an acknowledged message
  earlier in the log (each counted once);
* **moved**: an acknowledged message found at another offset than the one acknowledged;
* **consumed-lost**: a message delivered to the group whose offset now holds another value or
  nothing (a consumer saw data that the log later lost: it was served above the high
  watermark);
* **commits ahead**: a partition whose committed group offset (as the broker answers it at the
  end) is beyond the end of the log, or beyond the last offset delivered to the group plus one.

For the ``acks=1`` producer only **lost** counts (it is not idempotent: duplicates and
reordering after its retries are allowed), attributed to a fault by :func:`losses_by_fault`.

The read-back consumer assigns every partition from the earliest offset and reads until its
position reaches the high watermark of each, as librdkafka reports it; it gives up after
``timeout`` seconds (:class:`ReadBackTimeoutError`).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from bench.soak_workload import Ack, Commit, parse_value
from sluice.testing.cluster import QUIET


class ReadBackTimeoutError(RuntimeError):
    """The read-back did not reach every partition's high watermark in time."""


Log = dict[int, list[tuple[int, bytes]]]


def read_back(bootstrap: str, topic: str, partitions: int, timeout: float = 120.0) -> Log:
    """Every record of ``topic``'s partitions as ``{partition: [(offset, value), ...]}``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"soak-check-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            **QUIET,
        }
    )
    log: Log = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + timeout
    try:
        ends = {}
        for p in range(partitions):
            marks = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            high = None if marks is None else marks[1]
            if high is None:
                raise ReadBackTimeoutError(f"expected {topic}-{p}'s watermarks, found no answer")
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        position = dict.fromkeys(range(partitions), 0)
        while any(position[p] < ends[p] for p in range(partitions)):
            if time.monotonic() > deadline:
                raise ReadBackTimeoutError(
                    f"expected to read up to {ends} in {timeout}s, found positions {position}"
                )
            for msg in consumer.consume(1000, 1.0):
                if msg.error() is not None:
                    continue
                part, offset = msg.partition(), msg.offset()
                assert part is not None and offset is not None
                log[part].append((offset, msg.value() or b""))
                position[part] = offset + 1
    finally:
        consumer.close()
    return log


def committed_offsets(bootstrap: str, topic: str, group: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets as the broker answers them (-1001: none)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **QUIET})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found}


@dataclass
class CheckResult:
    acked: int
    lost: int
    duplicated: int
    reordered: int
    moved: int
    consumed: int
    consumed_lost: int
    commits_ahead: int
    log_records: int
    examples: dict[str, list[str]]

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.duplicated
            or self.reordered
            or self.moved
            or self.consumed_lost
            or self.commits_ahead
        )

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "ok": self.ok}


def check(
    acks: Iterable[Ack],
    log: Log,
    delivered: Iterable[tuple[int, int, bytes]] = (),
    committed: Mapping[int, int] | None = None,
) -> CheckResult:
    """Hold ``log`` to the acknowledgements, deliveries and committed offsets; see the module
    docstring for each count. ``examples`` holds up to five instances of each failure."""
    examples: dict[str, list[str]] = defaultdict(list)

    def example(kind: str, text: str) -> None:
        if len(examples[kind]) < 5:
            examples[kind].append(text)

    where: dict[tuple[int, int], list[int]] = defaultdict(list)  # (p, seq) -> offsets
    by_offset: dict[tuple[int, int], bytes] = {}
    duplicated = 0
    for p, records in log.items():
        copies: Counter[int] = Counter()
        for offset, value in records:
            by_offset[(p, offset)] = value
            try:
                vp, seq = parse_value(value)
            except ValueError:
                continue  # not the workload's (e.g. a direct produce of a test)
            where[(vp, seq)].append(offset)
            copies[seq] += 1
        for seq, n in copies.items():
            if n > 1:
                duplicated += n - 1
                example("duplicated", f"{p}:{seq} at offsets {where[(p, seq)]}")

    acked = list(acks)
    lost = moved = 0
    for a in acked:
        offsets = where.get((a.partition, a.seq))
        if not offsets:
            lost += 1
            example("lost", f"{a.partition}:{a.seq} acked at offset {a.offset} ({a.at:.1f}s)")
        elif a.offset not in offsets:
            moved += 1
            example("moved", f"{a.partition}:{a.seq} acked at {a.offset}, found at {offsets}")

    reordered = 0
    acked_seqs = {(a.partition, a.seq) for a in acked}
    for p, records in log.items():
        highest = -1
        for offset, value in records:
            try:
                vp, seq = parse_value(value)
            except ValueError:
                continue
            if (vp, seq) not in acked_seqs:
                continue
            if seq < highest:
                reordered += 1
                example("reordered", f"{p}:{seq} at offset {offset} after {p}:{highest}")
            highest = max(highest, seq)

    consumed = consumed_lost = 0
    delivered_max: dict[int, int] = {}
    for p, offset, value in delivered:
        consumed += 1
        delivered_max[p] = max(delivered_max.get(p, -1), offset)
        if by_offset.get((p, offset)) != value:
            consumed_lost += 1
            found = by_offset.get((p, offset))
            example("consumed_lost", f"{p}@{offset}: delivered {value!r}, log has {found!r}")

    commits_ahead = 0
    for p, offset in (committed or {}).items():
        if offset < 0:
            continue
        end = log[p][-1][0] + 1 if log.get(p) else 0
        if offset > end or offset > delivered_max.get(p, -1) + 1:
            commits_ahead += 1
            example(
                "commits_ahead",
                f"partition {p}: committed {offset}, log end {end}, "
                f"last delivered {delivered_max.get(p)}",
            )

    return CheckResult(
        acked=len(acked),
        lost=lost,
        duplicated=duplicated,
        reordered=reordered,
        moved=moved,
        consumed=consumed,
        consumed_lost=consumed_lost,
        commits_ahead=commits_ahead,
        log_records=sum(len(r) for r in log.values()),
        examples=dict(examples),
    )


class FaultSpan(Protocol):
    """What :func:`losses_by_fault` needs of a fault (``sluice.testing.faults.Fault``)."""

    kind: str
    target: str
    injected_at: float
    healed_at: float | None


#: A message acknowledged this long before a fault was injected may still be lost by it (it
#: was not yet on a follower when the leader died): librdkafka's linger plus replication lag.
LOSS_LEAD_S = 2.0
NO_FAULT = "no fault"


def lost_acks(acks: Iterable[Ack], log: Log) -> list[Ack]:
    """The acknowledged messages whose value is nowhere in ``log``."""
    present = set()
    for records in log.values():
        for _, value in records:
            try:
                present.add(parse_value(value))
            except ValueError:
                continue
    return [a for a in acks if (a.partition, a.seq) not in present]


def losses_by_fault(lost: Iterable[Ack], faults: Sequence[FaultSpan]) -> dict[str, int]:
    """Lost acknowledgements per fault (``"<kind> <target> @<injected_at>s"``). A message
    acknowledged at ``t`` goes to the first fault injected within :data:`LOSS_LEAD_S` after
    ``t`` (it hit the message before it reached a follower); else to the latest fault
    injected before ``t`` and not yet healed at ``t``; else to :data:`NO_FAULT`. ``faults``
    are in injection order."""
    out: Counter[str] = Counter()
    for a in lost:
        owner = next((f for f in faults if a.at <= f.injected_at <= a.at + LOSS_LEAD_S), None)
        if owner is None:
            for f in faults:
                healed = f.healed_at if f.healed_at is not None else float("inf")
                if f.injected_at <= a.at <= healed:
                    owner = f
        name = NO_FAULT if owner is None else (
            f"{owner.kind} {owner.target} @{owner.injected_at:.1f}s"
        )  # fmt: skip
        out[name] += 1
    return dict(out)


def last_commit(commits: Iterable[Commit]) -> dict[int, int]:
    """The latest offset each partition was committed at by the reader (client side)."""
    out: dict[int, int] = {}
    for c in commits:
        out.update(c.offsets)
    return out
