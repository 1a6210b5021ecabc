"""Log compaction: the cleaner's throughput (MB of log compacted per second) and the read speed
of a compacted topic against the same topic uncompacted, in-process on ``broker/log``.

The log: ~``size`` bytes (100 MB quick, 1 GB full) of records with 100-byte values over
``KEYS`` (10,000) keys drawn at random (seeded), in batches of ``BATCH`` records, segments of
64 MiB, ``cleanup.policy=compact``, rolled so that nothing is in the active segment. It is
written once into ``pristine/``; every repetition copies it (so each pass cleans the same
bytes) and then:

1. reads the uncompacted copy from the start with 1 MiB reads, as a consumer restoring the
   topic would (``Log.read``, whole batches, the next offset from the last batch header);
2. cleans it in one pass (``Cleaner`` with the broker's default 128 MiB key map, no
   checkpoint: the whole log is dirty), timed from the pass's own stats (``bytes_read`` /
   ``elapsed_s``: the offset map built over the dirty segments, then every segment rewritten
   and swapped);
3. reads the compacted log from the start the same way.

Each read of a whole log is repeated until ``READ_SECONDS`` have passed (the compacted log is
small: one record per key) and timed as the mean of those rounds; both logs are in the page
cache (just copied or just written), so the comparison is of the read path, not the disk.

Rows (experiment ``log_cleaner``): the cleaner's MB/s; both reads in MB/s and as the time to
read the whole topic (what a changelog restore waits for), and their ratio; the log's size
before and after. Each repeated figure is the median of ``REPEATS`` passes.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from pathlib import Path

from bench.bench_broker import load_average
from bench.results import REPEATS, Results
from sluice.broker.log.cleaner import Cleaner, CleanerStats
from sluice.broker.log.cleaner_config import CleanerConfig
from sluice.broker.log.cleaner_manager import LogToClean
from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.record_batch import iter_batches
from sluice.broker.log.records import encode_batch
from sluice.common.topic_partition import TopicPartition

KEYS = 10_000
VALUE = 100  # bytes per value
BATCH = 100  # records per batch
SEGMENT_BYTES = 64 << 20
READ_BYTES = 1 << 20  # per Log.read, as a consumer's fetch.max.bytes-sized fetch
READ_SECONDS = 0.5  # the compacted log is read again until this long has passed
SIZES = {True: 100_000_000, False: 1_000_000_000}  # quick, full
TP = TopicPartition("bench-compacted", 0)
NOW = 1_700_000_000_000  # a fixed clock: nothing here depends on time passing


def config() -> LogConfig:
    return LogConfig(cleanup_policy="compact", segment_bytes=SEGMENT_BYTES)


def write_log(directory: Path, size: int, keys: int = KEYS, seed: int = 18) -> int:
    """A compacted-topic log of about ``size`` bytes in ``directory``, closed; its records."""
    rng = random.Random(seed)
    log = Log(directory, config(), clock=lambda: NOW)
    value = b"x" * VALUE
    records = 0
    while log.size_bytes < size:
        batch = [(b"key-%06d" % rng.randrange(keys), value) for _ in range(BATCH)]
        log.append(encode_batch(batch))
        records += BATCH
    log.roll()  # every record outside the active segment: all of it is cleanable
    log.close()
    return records


def read_all(log: Log) -> tuple[int, int]:
    """(bytes, batches) read from the log start to the high watermark in 1 MiB reads."""
    offset, total, batches = log.log_start_offset, 0, 0
    while offset < log.high_watermark:
        result = log.read(offset, READ_BYTES)
        if result.slice is None:
            break
        raw = result.slice.read()
        total += len(raw)
        for header in iter_batches(raw):
            offset = header.next_offset
            batches += 1
    return total, batches


def timed_reads(log: Log, at_least: float) -> tuple[int, float]:
    """(bytes of one whole read, seconds per whole read): read until ``at_least`` passed."""
    started = time.perf_counter()
    rounds = 0
    size = 0
    while True:
        size, _ = read_all(log)
        rounds += 1
        elapsed = time.perf_counter() - started
        if elapsed >= at_least:
            return size, elapsed / rounds


def clean(log: Log) -> CleanerStats:
    """One cleaning pass over the whole log (the broker's default key map), then the
    replaced segments deleted."""
    stats = Cleaner(CleanerConfig().max_keys_per_thread).clean(
        LogToClean.of(TP, log, None, NOW), NOW
    )
    log.purge_deleted_segments(force=True)
    return stats


def one_pass(pristine: Path, work: Path) -> dict[str, float]:
    """Copy the pristine log, read it, clean it, read the result (see the module)."""
    directory = work / f"{TP.topic}-{TP.partition}"
    shutil.rmtree(directory, ignore_errors=True)
    shutil.copytree(pristine, directory)
    log = Log(directory, config(), clock=lambda: NOW)
    try:
        before, before_s = timed_reads(log, READ_SECONDS)
        stats = clean(log)
        after, after_s = timed_reads(log, READ_SECONDS)
    finally:
        log.close()
        shutil.rmtree(directory, ignore_errors=True)
    return {
        "clean_mb_s": stats.mb_per_s,
        "clean_s": stats.elapsed_s,
        "kept": float(stats.records_kept),
        "before_mb": before / 1e6,
        "after_mb": after / 1e6,
        "before_s": before_s,
        "after_s": after_s,
    }


def run(
    results: Results, quick: bool, *, size: int | None = None, work_parent: Path = Path(".")
) -> None:
    """The rows of ``log_cleaner`` (see the module); ``size`` overrides the mode's log size,
    ``work_parent`` is where the temporary directory goes (removed at the end)."""
    size = SIZES[quick] if size is None else size
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-cleaner-", dir=work_parent))
    try:
        started = time.perf_counter()
        records = write_log(work / "pristine", size)
        written_s = time.perf_counter() - started
        passes = [one_pass(work / "pristine", work) for _ in range(REPEATS)]
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def runs(key: str) -> list[float]:
        return [p[key] for p in passes]

    exp = "log_cleaner"
    results.add_runs(exp, "cleaner", "compaction, MB/s", runs("clean_mb_s"), "MB/s")
    results.add_runs(exp, "cleaner", "one pass, s", runs("clean_s"), "s")
    results.add(exp, "uncompacted", "size, MB", passes[0]["before_mb"], "MB")
    results.add(exp, "compacted", "size, MB", passes[0]["after_mb"], "MB")
    results.add(exp, "compacted", "records kept", passes[0]["kept"], "records")
    for name, key in (("uncompacted", "before"), ("compacted", "after")):
        rates = [p[f"{key}_mb"] / p[f"{key}_s"] for p in passes]
        results.add_runs(exp, name, "read from the start, MB/s", rates, "MB/s")
        millis = [p[f"{key}_s"] * 1000 for p in passes]
        results.add_runs(exp, name, "read the whole topic, ms", millis, "ms")
    speedups = [p["before_s"] / p["after_s"] for p in passes]
    results.add_runs(exp, "uncompacted/compacted", "read the whole topic", speedups, "ratio")
    results.note(exp, f"{records:,} records of {VALUE} B over {KEYS:,} random keys, batches of "
                 f"{BATCH}, written in {written_s:.0f} s; {REPEATS} passes over copies of that "
                 f"log, median [min .. max]; load average {load_average()}")  # fmt: skip
