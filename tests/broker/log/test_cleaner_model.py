"""A stateful property test: the log cleaner against a dict model.

Random keyed appends (values and tombstones, every codec, some from an idempotent producer),
rolls, clock jumps, cleanings at random times and clean reopens. After every step, reading the
whole log must give: offsets strictly increasing, each record exactly as appended at that
offset, every key's latest appended record present (a tombstone may be gone only once
``delete.retention.ms`` has passed since it was appended), each key at most once in the part
of the log cleaned so far; a cleaning never changes the active segment's bytes; the
idempotent producer can carry on after a cleaning and a reopen.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.records import CODEC_NAMES, encode_batch

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

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @rule(
        items=st.lists(
            st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(max_size=40))),
            min_size=1,
            max_size=5,
        ),
        codec=st.sampled_from(sorted(CODEC_NAMES)),
        idempotent=st.booleans(),
    )
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

    @rule()
    def roll(self):
        self.log.roll()

    @rule(ms=st.integers(0, 2 * RETENTION))
    def tick(self, ms):
        self.clock.now += ms

    @rule()
    def clean(self):
        active = self.log.active_segment
        before = os.pread(active.fd, active.size, 0)
        stats = clean(self.log, self.clock.now, checkpoint=self.checkpoint)
        self.checkpoint = stats.end_offset
        assert self.log.active_segment is active
        assert os.pread(active.fd, active.size, 0) == before
        self.log.purge_deleted_segments()

    @rule()
    def reopen(self):
        self.log.close()
        self.log = Log(
            self.tmp / "t-0", CONFIG, recovery_point=self.end, clean_shutdown=True,
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
        offsets = [r.offset for r in records]
        assert offsets == sorted(set(offsets))
        for h in headers:
            assert h.base_offset <= h.last_offset
        for r in records:
            key, value, _ = self.appended[r.offset]
            assert (r.key, r.value) == (key, value)
        present = {r.offset for r in records}
        for key, offset in self.latest.items():
            if offset in present:
                continue
            _, value, appended_ms = self.appended[offset]
            assert value is None, f"latest value of {key!r} at {offset} lost"
            assert self.clock.now - appended_ms >= RETENTION, "tombstone removed too early"
        if self.checkpoint is not None:
            cleaned_keys = [r.key for r in records if r.offset < self.checkpoint]
            assert len(cleaned_keys) == len(set(cleaned_keys))


TestCleanerModel = CleanerModel.TestCase
TestCleanerModel.settings = settings(
    max_examples=int(os.environ.get("SLUICE_MODEL_EXAMPLES", "60")),
    stateful_step_count=40,
    deadline=None,
)
