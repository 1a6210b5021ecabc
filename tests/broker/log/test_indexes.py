"""OffsetIndex and TimeIndex against a plain sorted-list model, and their sanity checks."""

import bisect

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice.broker.log.errors import CorruptIndexError, NonMonotonicOffsetError
from sluice.broker.log.offset_index import OffsetIndex
from sluice.broker.log.time_index import TimeIndex


@given(
    st.lists(st.tuples(st.integers(1, 50), st.integers(1, 500)), max_size=40),
    st.lists(st.integers(0, 3000), max_size=20),
)
def test_offset_index_matches_a_sorted_map(tmp_path_factory, steps, probes):
    path = tmp_path_factory.mktemp("idx") / "00000000000000000100.index"
    index = OffsetIndex(path, 100)
    model: list[tuple[int, int]] = []
    offset, position = 100, 0
    for doff, dpos in steps:
        offset, position = offset + doff, position + dpos
        index.append(offset, position)
        model.append((offset, position))
    for probe in probes:
        i = bisect.bisect_right([o for o, _ in model], probe) - 1
        assert index.lookup(probe) == (model[i] if i >= 0 else (100, 0))
    index.close()
    reopened = OffsetIndex(path, 100)
    assert list(zip(reopened.keys, reopened.values, strict=True)) == model
    reopened.sanity_check(position + 1)
    if model:
        cut = model[len(model) // 2][0]
        reopened.truncate_to(cut)
        assert [o for o in reopened.keys] == [o for o, _ in model if o < cut]
    reopened.close()


def test_offset_index_rejects_non_increasing_entries(tmp_path):
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0)
    index.append(10, 100)
    with pytest.raises(NonMonotonicOffsetError, match="expected an entry after"):
        index.append(10, 200)
    with pytest.raises(NonMonotonicOffsetError):
        index.append(11, 100)
    index.close()


def test_truncated_index_file_is_detected(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0)
    index.append(5, 10)
    index.close()
    with open(path, "ab") as f:
        f.write(b"\x01\x02\x03")
    with pytest.raises(CorruptIndexError, match="multiple of 8"):
        OffsetIndex(path, 0)


def test_sanity_check_catches_positions_past_the_log(tmp_path):
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0)
    index.append(5, 1000)
    with pytest.raises(CorruptIndexError, match="below position 500"):
        index.sanity_check(500)
    index.close()


def test_full_index_reports_full(tmp_path):
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0, max_bytes=16)
    index.append(1, 1)
    index.append(2, 2)
    assert index.is_full
    index.close()


def test_is_full_follows_truncation_and_reload(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, max_bytes=16)
    index.append(1, 1)
    assert not index.is_full
    index.append(2, 2)
    index.truncate_to(2)  # drops the entry at offset 2
    assert not index.is_full
    index.append(3, 3)
    index.close()
    reopened = OffsetIndex(path, 0, max_bytes=16)
    assert reopened.is_full
    reopened.reset()
    assert not reopened.is_full
    reopened.close()


def test_time_index_keeps_only_growing_timestamps(tmp_path):
    path = tmp_path / "00000000000000000010.timeindex"
    index = TimeIndex(path, 10)
    assert index.maybe_append(100, 12)
    assert not index.maybe_append(100, 13)  # not larger
    assert not index.maybe_append(90, 14)
    assert index.maybe_append(150, 20)
    assert index.lookup(99) == (-1, 10)
    assert index.lookup(120) == (100, 12)
    assert index.lookup(1_000) == (150, 20)
    index.close()
    reopened = TimeIndex(path, 10)
    assert reopened.last_entry() == (150, 20)
    reopened.sanity_check(21)
    with pytest.raises(CorruptIndexError):
        reopened.sanity_check(15)
    reopened.truncate_to(20)
    assert reopened.last_entry() == (100, 12)
    reopened.close()
