"""The storage engine against the disk: ``Log.append`` of 16 KiB and 1 MiB batches against
plain ``os.write`` of the same bytes to the same directory, and ``Log.read`` slices against
raw ``os.pread`` of the same ranges. Ratios within one run (the machine is noisy)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from bench.results import Results
from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.record_batch import parse_header
from sluice.broker.log.records import encode_batch


def _batch(size: int) -> bytes:
    per = 200
    n = max(size // (per + 10), 1)
    return encode_batch([(None, os.urandom(per))] * n)


def append_vs_write(results: Results, total: int, batch_size: int, work: Path) -> None:
    batch = _batch(batch_size)
    count = max(total // len(batch), 1)
    label = f"{batch_size // 1024} KiB batches"
    raw_path = work / "raw.bin"
    fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    start = time.perf_counter()
    for _ in range(count):
        os.write(fd, batch)
    raw = time.perf_counter() - start
    os.close(fd)
    raw_path.unlink()
    log = Log(work / "bench-0", LogConfig(segment_bytes=1 << 30))
    start = time.perf_counter()
    for _ in range(count):
        log.append(batch)
    sluice = time.perf_counter() - start
    mb = count * len(batch) / 1e6
    results.add("log_append", "os.write", label, mb / raw, "MB/s")
    results.add("log_append", "sluice Log.append", label, mb / sluice, "MB/s")
    results.add("log_append", "sluice/os.write", label, raw / sluice, "ratio")
    # Reads: 1 MiB slices of whole batches vs raw preads of the same ranges.
    slices = []
    offset = 0
    start = time.perf_counter()
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 20)
        assert info.slice is not None
        data = info.slice.read()
        slices.append((info.slice.position, len(data)))
        offset = _next_offset(data)
    sluice_read = time.perf_counter() - start
    fd = os.open(log.active_segment.log_path, os.O_RDONLY)
    start = time.perf_counter()
    for position, size in slices:
        os.pread(fd, size, position)
    raw_read = time.perf_counter() - start
    os.close(fd)
    results.add("log_read", "os.pread", label, mb / raw_read, "MB/s")
    results.add("log_read", "sluice Log.read", label, mb / sluice_read, "MB/s")
    results.add("log_read", "sluice/os.pread", label, raw_read / sluice_read, "ratio")
    log.close()
    shutil.rmtree(work / "bench-0")


def _next_offset(data: bytes) -> int:
    """The offset after the last batch in ``data`` (a header walk, as a consumer does)."""
    position, header = 0, parse_header(data)
    while position < len(data):
        header = parse_header(data, position)
        position += header.size
    return header.next_offset


def run(results: Results, quick: bool) -> None:
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-", dir="."))
    try:
        total = (256 if quick else 1024) << 20
        for size in (16 << 10, 1 << 20):
            append_vs_write(results, total, size, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
