"""A stateful property test: the log cleaner against a dict model.

Random keyed appends (values and tombstones, every codec, some from an idempotent producer),
transactions of two transactional producers (batches, commits, aborts, some left open),
rolls, clock jumps, cleanings at random times and clean and unclean reopens. After every
step, reading the whole log must give: offsets strictly increasing, each record exactly as
appended at that offset, every key's latest committed or non-transactional record present (a
tombstone may be gone only once ``delete.retention.ms`` has passed since it was appended),
each key at most once in the part of the log cleaned so far; a cleaning never changes the
active segment's bytes; the idempotent and transactional producers can carry on after a
cleaning and a reopen. Transactions: the last stable offset is the model's (the first offset
of the oldest open transaction); a ``read_committed`` reader — the consumer's algorithm over
Fetch's aborted transactions, from the ``.txnindex`` files — sees exactly the committed and
non-transactional records present, never an aborted one; a marker stays while any batch of
its transaction is in the log, and goes (or is emptied) only ``delete.retention.ms`` after
it was appended at the earliest.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from sluice.broker.log.control_batch import ABORT, read_marker
from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.record_batch import iter_batches
from sluice.broker.log.records import CODEC_NAMES, decode_batch, encode_batch

from .compaction_helpers import Clock, clean, read_all

RETENTION = 10_000
CONFIG = LogConfig(
    segment_bytes=900,
    index_interval_bytes=100,
    file_delete_delay_ms=0,
    cleanup_policy="compact",
    delete_retention_ms=RETENTION,
)
KEYS = [b"k%d" % i for i in range(8)]
TXN_PRODUCERS = [21, 22]
ITEMS = st.lists(
    st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(max_size=40))),
    min_size=1,
    max_size=5,
)


def read_committed(log):
    """The records a ``read_committed`` consumer gets (Kafka's ``CompletedFetch``): batches
    up to the last stable offset; at each batch with a producer id, the aborted transactions
    Fetch reported that begin at or before its last offset mark their producers aborted; a
    transactional data batch of an aborted producer is skipped; an ABORT marker clears its
    producer."""
    lso = log.last_stable_offset
    aborted = sorted(
        log.collect_aborted_transactions(log.log_start_offset, lso), key=lambda t: t.first_offset
    )
    aborted_pids: set[int] = set()
    out = []
    offset = log.log_start_offset
    while offset < lso:
        result = log.read(offset, 1 << 22, upper_bound="last_stable")
        if result.slice is None:
            break
        raw = result.slice.read()
        for h in iter_batches(raw):
            offset = h.next_offset
            if h.producer_id >= 0:
                while aborted and aborted[0].first_offset <= h.last_offset:
                    aborted_pids.add(aborted.pop(0).producer_id)
            if h.is_control:
                marker = read_marker(raw, h)
                if marker is not None and marker.kind == ABORT:
                    aborted_pids.discard(h.producer_id)
                continue
            if h.is_transactional and h.producer_id in aborted_pids:
                continue
            out.extend(decode_batch(raw, h.position))
    return out


class CleanerModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="sluice-cleaner-model-"))
        self.clock = Clock()
        self.log = Log(self.tmp / "t-0", CONFIG, clock=self.clock)
        self.appended: dict[int, tuple[bytes, bytes | None, int]] = {}  # offset → key, value, ms
        self.latest: dict[bytes, int] = {}  # key → offset of its latest record
        self.end = 0
        self.checkpoint: int | None = None
        self.sequence = 0
        # Transactions: offset → its transaction's number; per number: producer id, first
        # offset, state ("open", "commit", "abort"), marker offset and append time.
        self.txn_of: dict[int, int] = {}
        self.txns: list[dict] = []
        self.open_txn: dict[int, int] = {}  # producer id → number of its open transaction
        self.txn_sequence = dict.fromkeys(TXN_PRODUCERS, 0)
        self.marker_at: dict[int, int] = {}  # marker offset → transaction number

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @rule(items=ITEMS, codec=st.sampled_from(sorted(CODEC_NAMES)), idempotent=st.booleans())
    def append(self, items, codec, idempotent):
        producer = {}
        if idempotent:
            producer = dict(producer_id=7, producer_epoch=0, base_sequence=self.sequence)
            self.sequence += len(items)
        raw = encode_batch(items, timestamps=[self.clock.now] * len(items), codec=codec, **producer)
        info = self.log.append(raw)
        assert info.first_offset == self.end
        for i, (key, value) in enumerate(items):
            self.appended[self.end + i] = (key, value, self.clock.now)
            self.latest[key] = self.end + i
        self.end += len(items)

    @rule(
        items=ITEMS, codec=st.sampled_from(sorted(CODEC_NAMES)), pid=st.sampled_from(TXN_PRODUCERS)
    )
    def txn_append(self, items, codec, pid):
        raw = encode_batch(
            items, timestamps=[self.clock.now] * len(items), codec=codec, producer_id=pid,
            producer_epoch=0, base_sequence=self.txn_sequence[pid], transactional=True,
        )  # fmt: skip
        info = self.log.append(raw)  # an OutOfOrderSequenceError: the state was lost
        assert info.first_offset == self.end
        self.txn_sequence[pid] += len(items)
        if pid not in self.open_txn:
            self.open_txn[pid] = len(self.txns)
            self.txns.append({"pid": pid, "first": self.end, "state": "open"})
        for i, (key, value) in enumerate(items):
            self.appended[self.end + i] = (key, value, self.clock.now)
            self.txn_of[self.end + i] = self.open_txn[pid]
        self.end += len(items)

    @rule(pid=st.sampled_from(TXN_PRODUCERS), commit=st.booleans())
    def end_txn(self, pid, commit):
        number = self.open_txn.pop(pid, None)
        if number is None:
            return
        info = self.log.append_marker(pid, 0, commit=commit)
        assert info.first_offset == self.end
        txn = self.txns[number]
        txn.update(state="commit" if commit else "abort", marker=self.end, ms=self.clock.now)
        self.marker_at[self.end] = number
        self.end += 1

    def status(self, offset):
        number = self.txn_of.get(offset)
        return "plain" if number is None else self.txns[number]["state"]

    @rule()
    def roll(self):
        self.log.roll()

    @rule(ms=st.integers(0, 2 * RETENTION))
    def tick(self, ms):
        self.clock.now += ms

    @rule(from_start=st.booleans())
    def clean(self, from_start):
        """``from_start``: as after a lost ``cleaner-offset-checkpoint`` (everything dirty)."""
        active = self.log.active_segment
        before = os.pread(active.fd, active.size, 0)
        checkpoint = None if from_start else self.checkpoint
        stats = clean(self.log, self.clock.now, checkpoint=checkpoint)
        self.checkpoint = stats.end_offset
        assert self.log.active_segment is active
        assert os.pread(active.fd, active.size, 0) == before
        self.log.purge_deleted_segments()

    @rule(clean_shutdown=st.booleans())
    def reopen(self, clean_shutdown):
        if clean_shutdown:
            self.log.close()
        else:  # a kill -9 after a flush: no snapshot at the log end, the state is replayed
            self.log.flush()
            self.log.purge_deleted_segments(force=True)
            for segment in self.log.segments():
                segment.close()
        self.log = Log(
            self.tmp / "t-0", CONFIG, recovery_point=self.end, clean_shutdown=clean_shutdown,
            clock=self.clock,
        )  # fmt: skip

    @rule()
    def producer_carries_on(self):
        if not self.sequence:
            return
        raw = encode_batch(
            [(b"k0", b"more")], timestamps=[self.clock.now], producer_id=7, producer_epoch=0,
            base_sequence=self.sequence,
        )  # fmt: skip
        self.log.append(raw)  # an OutOfOrderSequenceError here: the state was lost
        self.sequence += 1
        self.appended[self.end] = (b"k0", b"more", self.clock.now)
        self.latest[b"k0"] = self.end
        self.end += 1

    @invariant()
    def log_agrees_with_model(self):
        assert self.log.log_end_offset == self.end
        headers, records = read_all(self.log)
        records = [r for r in records if r.offset not in self.marker_at]  # data only
        offsets = [r.offset for r in records]
        assert offsets == sorted(set(offsets))
        for h in headers:
            assert h.base_offset <= h.last_offset
        for r in records:
            key, value, _ = self.appended[r.offset]
            assert (r.key, r.value) == (key, value)
        present = {r.offset for r in records}
        latest: dict[bytes, int] = {}
        for offset, (key, _, _) in self.appended.items():
            if self.status(offset) in ("plain", "commit") and offset > latest.get(key, -1):
                latest[key] = offset
        for key, offset in latest.items():
            if offset in present:
                continue
            _, value, appended_ms = self.appended[offset]
            assert value is None, f"latest value of {key!r} at {offset} lost"
            assert self.clock.now - appended_ms >= RETENTION, "tombstone removed too early"
        for offset, number in self.txn_of.items():
            if self.txns[number]["state"] == "open":
                assert offset in present, f"record {offset} of an open transaction lost"
        if self.checkpoint is not None:
            cleaned_keys = [r.key for r in records if r.offset < self.checkpoint]
            assert len(cleaned_keys) == len(set(cleaned_keys))
        self.check_transactions(headers, present)

    def check_transactions(self, headers, present):
        lso = min((t["first"] for t in self.txns if t["state"] == "open"), default=self.end)
        assert self.log.last_stable_offset == lso
        visible = [(r.offset, r.key, r.value) for r in read_committed(self.log)]
        expected = [
            (o, *self.appended[o][:2])
            for o in sorted(present)
            if o < lso and self.status(o) in ("plain", "commit")
        ]
        assert visible == expected, "read_committed sees aborted data or misses committed data"
        markers = {h.base_offset: h.record_count for h in headers if h.is_control}
        with_batches = {
            self.txn_of[h.base_offset] for h in headers
            if h.is_transactional and not h.is_control
        }  # fmt: skip
        indexed = {
            (t.producer_id, t.first_offset)
            for t in self.log.collect_aborted_transactions(self.log.log_start_offset, self.end)
        }
        for number in with_batches:  # an aborted batch left (even empty) is in an index
            txn = self.txns[number]
            if txn["state"] == "abort":
                assert (txn["pid"], txn["first"]) in indexed, f"no index entry for {txn}"
        for offset, number in self.marker_at.items():
            txn = self.txns[number]
            if markers.get(offset):
                continue  # still there, whole
            assert number not in with_batches, f"marker {offset} gone before its data"
            assert self.clock.now - txn["ms"] >= RETENTION, f"marker {offset} removed too early"


TestCleanerModel = CleanerModel.TestCase
TestCleanerModel.settings = settings(
    max_examples=int(os.environ.get("SLUICE_MODEL_EXAMPLES", "60")),
    stateful_step_count=100,
    deadline=None,
)
