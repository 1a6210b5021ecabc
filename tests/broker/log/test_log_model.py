"""A stateful property test: ``Log`` against a plain list of batches.

Random appends (any codec, random timestamps), reads, rolls, retention, truncation, flushes,
clean reopens and crashes (the active segment cut at a random byte past what was flushed, or
torn garbage appended) — after every step the log must agree with the model.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from sluice.broker.log.errors import OffsetOutOfRangeError
from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.record_batch import iter_batches
from sluice.broker.log.records import CODEC_NAMES, Record, decode_batch, encode_batch

CONFIG = LogConfig(segment_bytes=700, index_interval_bytes=120, file_delete_delay_ms=0)


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


class LogModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="sluice-model-"))
        self.clock = Clock()
        self.log = Log(self.tmp / "t-0", CONFIG, clock=self.clock)
        # The model: every batch as (base offset, records), in offset order.
        self.batches: list[tuple[int, list[Record]]] = []
        self.start = 0
        self.end = 0
        self.counter = 0

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- operations ------------------------------------------------------------------------

    @rule(
        n=st.integers(1, 6),
        codec=st.sampled_from(sorted(CODEC_NAMES)),
        ts=st.lists(st.integers(0, 10_000), min_size=6, max_size=6),
        value_size=st.integers(0, 90),
    )
    def append(self, n, codec, ts, value_size):
        items = []
        for _ in range(n):
            self.counter += 1
            key = None if self.counter % 7 == 0 else b"k%d" % self.counter
            items.append((key, (b"v%d" % self.counter).ljust(value_size, b"x")))
        raw = encode_batch(items, timestamps=ts[:n], codec=codec)
        info = self.log.append(raw)
        assert info.first_offset == self.end
        assert info.last_offset == self.end + n - 1
        records = [Record(self.end + i, ts[i], k, v) for i, (k, v) in enumerate(items)]
        self.batches.append((self.end, records))
        self.end += n

    @rule(data=st.data(), max_bytes=st.integers(1, 1500))
    def read(self, data, max_bytes):
        offset = data.draw(st.integers(self.start, self.end))
        result = self.log.read(offset, max_bytes)
        expected_batches = [(b, rs) for b, rs in self.batches if rs[-1].offset >= offset]
        if not expected_batches:
            assert result.slice is None
            return
        raw = result.slice.read()
        got = [(h.base_offset, decode_batch(raw, h.position)) for h in iter_batches(raw)]
        assert got == expected_batches[: len(got)]
        assert len(got) >= 1
        assert len(raw) <= max_bytes or len(got) == 1

    @rule(data=st.data())
    def read_out_of_range(self, data):
        offset = data.draw(st.sampled_from([self.start - 1, self.end + 1, -5]))
        if offset >= 0 and self.start <= offset <= self.end:
            return
        with pytest.raises(OffsetOutOfRangeError):
            self.log.read(offset, 100)

    @rule()
    def roll(self):
        self.log.roll()

    @rule()
    def flush(self):
        assert self.log.flush() == self.end

    @rule()
    def retention(self):
        # Everything is expired far in the future: all but the active segment goes.
        self.clock.now += 10 * 365 * 86_400_000
        self.log.delete_old_segments()
        self.log.purge_deleted_segments()
        self.start = max(self.start, self.log.segments()[0].base_offset)
        assert self.log.log_start_offset == self.start
        self.batches = [(b, rs) for b, rs in self.batches if b >= self.start]

    @rule(data=st.data())
    def truncate(self, data):
        target = data.draw(st.integers(self.start, self.end))
        new_end = self.log.truncate_to(target)
        dropped = [b for b, rs in self.batches if rs[-1].offset >= target]
        if target <= self.start:
            # At or below the first segment's base: the log restarts empty at the target.
            self.start = self.end = target
        elif dropped:
            self.end = dropped[0]  # a batch holding the target goes whole
        self.batches = [(b, rs) for b, rs in self.batches if rs[-1].offset < target]
        assert new_end == self.end

    @rule()
    def clean_reopen(self):
        rp = self.log.recovery_point
        self.log.close()
        self.log = Log(
            self.tmp / "t-0", CONFIG, recovery_point=rp, log_start_offset=self.start,
            clean_shutdown=True, clock=self.clock,
        )  # fmt: skip

    @precondition(lambda self: self.batches)
    @rule(data=st.data(), garbage=st.booleans())
    def crash(self, data, garbage):
        """Kill the process: unflushed bytes of the active segment may be torn."""
        rp = self.log.recovery_point
        active = self.log.active_segment
        path, size = active.log_path, active.size
        flushed_at = 0
        if rp > active.base_offset:
            flushed_at = active.translate_offset(rp) or size
        # Drop the Log without closing it cleanly (no flush, no final index entries).
        for seg in self.log.segments():
            seg.close()
        if garbage:
            with open(path, "ab") as f:
                f.write(data.draw(st.binary(min_size=1, max_size=80)))
        else:
            cut = data.draw(st.integers(flushed_at, size))
            os.truncate(path, cut)
        self.log = Log(
            self.tmp / "t-0", CONFIG, recovery_point=rp, log_start_offset=self.start,
            clean_shutdown=False, clock=self.clock,
        )  # fmt: skip
        self.end = self.log.log_end_offset
        self.batches = [(b, rs) for b, rs in self.batches if rs[-1].offset < self.end]
        expected_end = self.batches[-1][1][-1].offset + 1 if self.batches else self.start
        assert self.end >= rp
        # Recovery keeps exactly the whole batches that survived the cut.
        assert self.end in (expected_end, max(expected_end, active.base_offset))

    @rule(data=st.data())
    def offset_for_timestamp(self, data):
        target = data.draw(st.integers(-1, 10_001))
        expected = next(
            (
                (r.offset, r.timestamp)
                for _, rs in self.batches
                for r in rs
                if r.timestamp >= target and r.offset >= self.start
            ),
            None,
        )
        assert self.log.offset_for_timestamp(target) == expected

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def offsets_agree(self):
        assert self.log.log_end_offset == self.end
        assert self.log.log_start_offset == self.start
        assert self.start <= self.log.high_watermark <= self.end
        assert self.log.recovery_point <= self.end

    @invariant()
    def whole_log_reads_back(self):
        if self.start == self.end:
            return
        offset, seen = self.start, []
        while offset < self.end:
            result = self.log.read(offset, 1 << 20)
            assert result.slice is not None
            raw = result.slice.read()
            for h in iter_batches(raw):
                seen.append((h.base_offset, decode_batch(raw, h.position)))
                offset = h.next_offset
        assert seen == [(b, rs) for b, rs in self.batches]


TestLogModel = LogModel.TestCase
# SLUICE_MODEL_EXAMPLES=1000 for a long soak; the default keeps `make test` quick.
TestLogModel.settings = settings(
    max_examples=int(os.environ.get("SLUICE_MODEL_EXAMPLES", "60")),
    stateful_step_count=30,
    deadline=None,
)
