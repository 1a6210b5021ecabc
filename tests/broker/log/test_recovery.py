"""Corruption and crash recovery: the log comes back with exactly its valid prefix."""

import os

import pytest

from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.log_segment import file_name
from sluice.broker.log.record_batch import iter_batches
from sluice.broker.log.records import decode_batch

from .helpers import batch

CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=100)


def build(directory, batches=30):
    log = Log(directory, CONFIG)
    sizes = []
    for i in range(batches):
        info = log.append(batch(2, tag=b"%d" % i, ts=i))
        sizes.append((info.first_offset, info.size))
    log.close()
    return sizes


def all_records(log):
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        raw = log.read(offset, 1 << 20).slice.read()
        for h in iter_batches(raw):
            out.extend(decode_batch(raw, h.position))
            offset = h.next_offset
    return out


def segment_files(directory):
    return sorted(p for p in directory.iterdir() if p.suffix == ".log")


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_bit_flip_mid_segment_keeps_exactly_the_prefix_before_it(tmp_path, where):
    directory = tmp_path / "t-0"
    build(directory)
    reference = Log(directory, CONFIG)
    records = all_records(reference)
    reference.close()
    segments = segment_files(directory)
    victim = {"first": segments[0], "middle": segments[len(segments) // 2], "last": segments[-1]}[
        where
    ]
    raw = victim.read_bytes()
    flip_at = len(raw) // 2
    with open(victim, "r+b") as f:
        f.seek(flip_at)
        f.write(bytes([raw[flip_at] ^ 0x10]))
    base = int(victim.name[:20])
    # The batch holding the flipped byte, and everything after it, is gone.
    first_bad = next(h.base_offset for h in iter_batches(raw) if flip_at < h.position + h.size)
    assert first_bad is not None and first_bad >= base
    recovered = Log(directory, CONFIG, recovery_point=0, clean_shutdown=False)
    assert recovered.recovered_bytes_cut > 0
    assert recovered.log_end_offset == first_bad
    assert all_records(recovered) == [r for r in records if r.offset < first_bad]
    # Later segments were unreachable and are gone.
    assert all(int(p.name[:20]) <= base for p in segment_files(directory))
    recovered.close()


def test_truncated_index_is_rebuilt_even_after_a_clean_shutdown(tmp_path):
    directory = tmp_path / "t-0"
    build(directory)
    index = directory / file_name(0, ".index")
    before = index.read_bytes()
    os.truncate(index, len(before) - 3)
    log = Log(directory, CONFIG, recovery_point=10**9, clean_shutdown=True)
    assert index.read_bytes() == before
    assert log.recovered_bytes_cut == 0
    assert len(all_records(log)) == 60
    log.close()


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_missing_index_is_rebuilt(tmp_path, suffix):
    directory = tmp_path / "t-0"
    build(directory)
    path = directory / file_name(0, suffix)
    before = path.read_bytes()
    path.unlink()
    log = Log(directory, CONFIG, recovery_point=10**9, clean_shutdown=True)
    assert path.read_bytes() == before
    assert len(all_records(log)) == 60
    log.close()


def test_index_pointing_past_the_log_is_rebuilt(tmp_path):
    directory = tmp_path / "t-0"
    build(directory)
    with open(directory / file_name(0, ".index"), "ab") as f:
        f.write((10_000).to_bytes(4, "big") + (999_999).to_bytes(4, "big"))
    log = Log(directory, CONFIG, recovery_point=10**9, clean_shutdown=True)
    assert len(all_records(log)) == 60
    log.close()


def test_unclean_shutdown_with_torn_tail(tmp_path):
    directory = tmp_path / "t-0"
    build(directory)
    last = segment_files(directory)[-1]
    with open(last, "ab") as f:
        f.write(b"\x00" * 7 + b"\x05" + b"\x00\x00\x01\x00" + b"\xab" * 30)
    log = Log(directory, CONFIG, recovery_point=0, clean_shutdown=False)
    assert log.recovered_bytes_cut == 42
    assert log.log_end_offset == 60
    log.close()


def test_stray_files_from_a_crash_mid_delete_are_removed(tmp_path):
    directory = tmp_path / "t-0"
    build(directory)
    (directory / (file_name(0, ".log") + ".deleted")).write_bytes(b"junk")
    (directory / file_name(999, ".index")).write_bytes(b"")
    log = Log(directory, CONFIG, recovery_point=10**9)
    names = {p.name for p in directory.iterdir()}
    assert file_name(999, ".index") not in names
    assert not any(n.endswith(".deleted") for n in names)
    log.close()
