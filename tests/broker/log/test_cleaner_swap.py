"""A crash at every file rename of the cleaner's swap (``.cleaned`` → ``.swap`` → live, old
segments → ``.deleted``), then a reopen: the log holds either all the old segments or the
cleaned one — no record lost, none duplicated, offsets intact, the aborted transactions of
the ``.txnindex`` files those of the same side — and no temporary file is left.
"""

from __future__ import annotations

import os
import shutil

import pytest

from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.log_loader import prepare_directory
from sluice.broker.log.log_segment import CLEANED_SUFFIX, SWAP_SUFFIX
from sluice.broker.log.records import GZIP, NONE, encode_batch

from .compaction_helpers import Clock, clean, read_all, segment_files

CONFIG = LogConfig(segment_bytes=1 << 20, cleanup_policy="compact", file_delete_delay_ms=0)


class Crash(Exception):
    pass


def build(directory, clock, transactions=False):
    log = Log(directory, CONFIG, clock=clock)
    for round_ in range(4):
        for i in range(6):
            value = None if (round_, i) == (2, 3) else b"v%d-%d" % (round_, i)
            codec = GZIP if i % 2 else NONE
            log.append(encode_batch([(b"k%d" % i, value)], timestamps=[clock.now], codec=codec))
        if transactions and round_ < 3:  # an aborted and a committed one in three segments
            for pid, commit in ((30 + round_, False), (40 + round_, True)):
                log.append(encode_batch(
                    [(b"t%d" % pid, b"txn")], timestamps=[clock.now], producer_id=pid,
                    producer_epoch=0, base_sequence=0, transactional=True,
                ))  # fmt: skip
                log.append_marker(pid, 0, commit=commit)
        log.roll()
    log.append(encode_batch([(b"k0", b"active")], timestamps=[clock.now]))
    log.flush()
    return log


def records_of(log):
    """Every record, and the aborted transactions a read_committed fetch would be told of."""
    records = [(r.offset, r.key, r.value) for r in read_all(log)[1]]
    return records, log.collect_aborted_transactions(0, log.log_end_offset)


def abandon(log):
    """What a kill -9 leaves: no flush, no close, just the files as they are."""
    for segment in log.segments():
        segment.close()


@pytest.mark.parametrize("transactions", [False, True])
def test_a_crash_at_each_rename_leaves_the_old_or_the_new_segments(
    tmp_path, monkeypatch, transactions
):
    clock = Clock()
    log = build(tmp_path / "orig" / "t-0", clock, transactions)
    before = records_of(log)
    end = log.log_end_offset
    log.close()

    # A whole run, counting the renames.
    shutil.copytree(tmp_path / "orig", tmp_path / "full")
    full = Log(tmp_path / "full" / "t-0", CONFIG, recovery_point=end, clock=clock)
    real_rename = os.rename
    renames = []
    monkeypatch.setattr(os, "rename", lambda a, b: (renames.append(b), real_rename(a, b)))
    clean(full, clock.now)
    monkeypatch.setattr(os, "rename", real_rename)
    after = records_of(full)
    full.close()
    assert len(after[0]) < len(before[0])
    swaps = sum(1 for name in renames if str(name).endswith(SWAP_SUFFIX))
    # .cleaned → .swap (3 files, 4 with a .txnindex), 4 old segments → .deleted (12, and
    # their .txnindex files), .swap → live
    assert len(renames) == (18 if not transactions else 2 * 4 + 12 + 3)
    if transactions:  # the aborted data is gone, the markers and their entries stay
        assert after[1] == before[1] and len(after[1]) == 3
        assert not [r for r in after[0] if r[1].startswith(b"t3")]

    for crash_at in range(len(renames) + 1):
        where = tmp_path / f"crash{crash_at}"
        shutil.copytree(tmp_path / "orig", where)
        log = Log(where / "t-0", CONFIG, recovery_point=end, clock=clock)
        done = []

        def rename(a, b, done=done, crash_at=crash_at):
            if len(done) == crash_at:
                raise Crash(f"killed before rename {crash_at}: {a} -> {b}")
            done.append(b)
            real_rename(a, b)

        monkeypatch.setattr(os, "rename", rename)
        if crash_at < len(renames):
            with pytest.raises(Crash):
                clean(log, clock.now)
        else:
            clean(log, clock.now)
        monkeypatch.setattr(os, "rename", real_rename)
        abandon(log)

        again = Log(where / "t-0", CONFIG, recovery_point=end, clean_shutdown=False, clock=clock)
        got = records_of(again)
        assert got in (before, after), f"crash before rename {crash_at}: a mixed state"
        assert got == (before if crash_at < swaps else after)  # live once every .swap exists
        assert again.log_end_offset == end
        names = segment_files(where / "t-0")
        assert not [n for n in names if n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX, ".deleted"))]
        # The interrupted pass, run again, ends where the whole run ended.
        clean(again, clock.now)
        assert records_of(again) == after
        again.close()


def test_stray_swap_files_from_a_partial_cleaned_rename_are_rolled_back(tmp_path):
    clock = Clock()
    log = build(tmp_path / "t-0", clock)
    before = records_of(log)
    first = log.segments()[0]
    log.close()
    # A .swap log whose indexes are still .cleaned: step 2 did not finish.
    d = tmp_path / "t-0"
    stem = first.log_path.name
    shutil.copy(d / stem, d / (stem + SWAP_SUFFIX))
    (d / (stem.replace(".log", ".index") + CLEANED_SUFFIX)).write_bytes(b"")
    prepare_directory(d)
    assert not [n for n in segment_files(d) if n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX))]
    again = Log(d, CONFIG, clock=clock)
    assert records_of(again) == before
    again.close()
