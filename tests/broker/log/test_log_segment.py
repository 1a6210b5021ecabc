import os

import pytest

from sluice.broker.log.log_segment import LogSegment, file_name, parse_base_offset
from sluice.broker.log.record_batch import assign_offsets, validate_batch
from sluice.broker.log.records import decode_batch

from .helpers import batch


def fill(segment, count, *, start=None, per_batch=3, ts0=1_000):
    """Append ``count`` batches with consecutive offsets; return their (base, last)."""
    offset = segment.next_offset if start is None else start
    out = []
    for i in range(count):
        raw = bytearray(batch(per_batch, timestamps=[ts0 + 10 * i + j for j in range(per_batch)]))
        assign_offsets(raw, 0, offset, 0)
        header = validate_batch(raw)
        segment.append(raw, [header])
        out.append((offset, header.last_offset))
        offset = header.next_offset
    return out


@pytest.fixture
def segment(tmp_path):
    seg = LogSegment(tmp_path, 50, index_interval_bytes=200)
    yield seg
    seg.close()


def test_file_names():
    assert file_name(368769, ".log") == "00000000000000368769.log"
    assert parse_base_offset("00000000000000368769.timeindex") == 368769
    with pytest.raises(ValueError):
        parse_base_offset("368769.log")


def test_append_builds_sparse_indexes(segment):
    batches = fill(segment, 40)
    assert segment.next_offset == batches[-1][1] + 1
    assert 0 < len(segment.offset_index) < 40  # sparse
    assert segment.max_timestamp == 1_000 + 390 + 2
    segment.sanity_check()
    for base, last in batches:
        for offset in (base, last):
            position = segment.translate_offset(offset)
            header = validate_batch(os.pread(segment.fd, 61 + 4096, position)[:4096], 0)
            assert header.base_offset == base


def test_read_returns_whole_batches_within_max_bytes(segment):
    batches = fill(segment, 30)
    batch_size = segment.size // 30
    sl = segment.read(batches[4][0] + 1, 3 * batch_size + 5)
    assert sl.size == 3 * batch_size
    records = [r for i in range(3) for r in decode_batch(sl.read(), i * batch_size)]
    assert records[0].offset == batches[4][0]
    # Too small for one batch: one batch anyway, unless asked not to.
    assert segment.read(batches[0][0], 10).size == batch_size
    assert segment.read(batches[0][0], 10, min_one_batch=False) is None
    # Bounded by a position (the high watermark's).
    sl = segment.read(batches[0][0], 1 << 20, max_position=2 * batch_size)
    assert sl.size == 2 * batch_size
    assert segment.read(batches[-1][1] + 1, 1000) is None


def test_a_read_that_fits_ends_exactly_at_its_bound_from_every_batch(segment, monkeypatch):
    """A read whose rest fits in max_bytes reads no header past its start (it ends at the
    bound, a batch boundary); from every batch and every bound it is the same slice as a read
    that must walk (max_bytes exactly the bytes up to the bound) and holds every offset up
    to it."""
    batches = fill(segment, 30)
    batch_size = segment.size // 30
    walk = LogSegment._iter_headers
    for i, (base, _) in enumerate(batches):
        for bound in (i + 1, i + 7, 30):
            max_position = min(bound, 30) * batch_size
            start = segment.translate_offset(base)

            def only_the_start(self, position, end=None, _start=start):
                assert position <= _start, f"expected no header read past {_start}, at {position}"
                return walk(self, position, end)

            monkeypatch.setattr(LogSegment, "_iter_headers", only_the_start)
            fits = segment.read(base, 1 << 20, max_position=max_position)
            monkeypatch.setattr(LogSegment, "_iter_headers", walk)
            exact = segment.read(base, max_position - i * batch_size, max_position=segment.size)
            assert fits == exact == (segment.fd, i * batch_size, max_position - i * batch_size)
            offsets = [
                r.offset
                for k in range(fits.size // batch_size)
                for r in decode_batch(fits.read()[k * batch_size : (k + 1) * batch_size])
            ]
            assert offsets == list(range(base, batches[min(bound, 30) - 1][1] + 1))


def test_find_offset_by_timestamp(segment):
    fill(segment, 20)
    # timestamps are 1000 + 10*i + j for batch i, record j; offsets from 50, 3 per batch
    assert segment.find_offset_by_timestamp(1_000) == (50, 1_000)
    assert segment.find_offset_by_timestamp(1_051) == (50 + 5 * 3 + 1, 1_051)
    assert segment.find_offset_by_timestamp(1_053) == (50 + 6 * 3, 1_060)
    assert segment.find_offset_by_timestamp(99_999) is None


def test_recover_rebuilds_identical_indexes(segment):
    fill(segment, 40)
    keys, values = list(segment.offset_index.keys), list(segment.offset_index.values)
    ts = list(segment.time_index.keys)
    assert segment.recover() == (0, None)
    assert list(segment.offset_index.keys) == keys
    assert list(segment.offset_index.values) == values
    assert list(segment.time_index.keys) == ts


def test_recover_cuts_a_torn_tail(segment):
    fill(segment, 10)
    whole = segment.size
    os.pwrite(segment.fd, b"\x00\x00\x00\x00\x00\x00\x00\x99\x00\x00\x01", whole)
    segment._size = whole + 11
    cut, why = segment.recover()
    assert cut == 11 and why
    assert segment.size == whole


def test_truncate_to_drops_the_batch_holding_the_offset(segment):
    batches = fill(segment, 10)
    removed = segment.truncate_to(batches[5][0] + 1)
    assert removed > 0
    assert segment.next_offset == batches[5][0]
    segment.sanity_check()
    assert segment.truncate_to(10_000) == 0


def test_missing_index_is_rebuilt_on_open(tmp_path):
    seg = LogSegment(tmp_path, 0, index_interval_bytes=100)
    fill(seg, 20)
    keys = list(seg.offset_index.keys)
    seg.close()
    (tmp_path / file_name(0, ".index")).unlink()
    reopened = LogSegment(tmp_path, 0, index_interval_bytes=100)
    assert len(reopened.offset_index) == 0  # a missing index opens empty ...
    assert "missing" in reopened.index_rebuilt_because  # ... flagged, so the log recovers
    reopened.recover()
    assert list(reopened.offset_index.keys) == keys
    reopened.close()


def test_failed_segment_open_leaks_no_file_descriptor(tmp_path, monkeypatch):
    """Found by the broker's robustness tests: out of descriptors (EMFILE) while opening an
    index must not leak the descriptors already opened."""
    from sluice.broker.log import log_segment

    def fail(*args, **kwargs):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(log_segment.TimeIndex, "__init__", fail)
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(OSError):
        log_segment.LogSegment(tmp_path, 0)
    assert len(os.listdir("/proc/self/fd")) == before
