"""Cleaner throughput and read speed of a compacted log vs the uncompacted one.

    .venv/bin/python -m tests.broker.log.bench_cleaner [MB] [KEYS]

Appends ~MB megabytes (default 100) of 100-byte-value records over KEYS keys (default 10 000)
in batches of 100, cleans the log once (one pass, the default 128 MiB key map), and reads the
whole log from the start with 1 MiB fetches before and after. Not a pytest module.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.records import NONE, encode_batch

from .compaction_helpers import Clock, clean


def read_everything(log: Log) -> tuple[int, float]:
    start = time.perf_counter()
    offset, total = log.log_start_offset, 0
    while offset < log.high_watermark:
        result = log.read(offset, 1 << 20)
        if result.slice is None:
            break
        raw = result.slice.read()
        total += len(raw)
        # The next offset is in the last batch's header: BaseOffset + LastOffsetDelta + 1.
        pos = 0
        while pos < len(raw):
            base = int.from_bytes(raw[pos : pos + 8], "big")
            length = int.from_bytes(raw[pos + 8 : pos + 12], "big")
            delta = int.from_bytes(raw[pos + 23 : pos + 27], "big")
            offset = base + delta + 1
            pos += 12 + length
    return total, time.perf_counter() - start


def main(mb: int = 100, keys: int = 10_000, codec: int = NONE) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="sluice-bench-cleaner-"))
    try:
        clock = Clock()
        config = LogConfig(cleanup_policy="compact", segment_bytes=64 << 20)
        log = Log(tmp / "t-0", config, clock=clock)
        value = b"x" * 100
        i = 0
        while log.size_bytes < mb * 1_000_000:
            batch = [(b"key-%06d" % ((i + j) % keys), value) for j in range(100)]
            log.append(encode_batch(batch, codec=codec))
            i += 100
        log.roll()
        before_bytes, before_s = read_everything(log)
        stats = clean(log, clock.now)
        log.purge_deleted_segments()
        after_bytes, after_s = read_everything(log)
        result = {
            "log_mb": before_bytes / 1e6,
            "records": float(i),
            "clean_s": stats.elapsed_s,
            "clean_mb_per_s": stats.mb_per_s,
            "compacted_mb": after_bytes / 1e6,
            "read_uncompacted_mb_per_s": before_bytes / 1e6 / before_s,
            "read_uncompacted_s": before_s,
            "read_compacted_s": after_s,
        }
        log.close()
        return result
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    for name, number in main(*args).items():
        print(f"{name:28s} {number:12.3f}")
