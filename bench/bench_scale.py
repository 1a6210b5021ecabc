"""Produce and consume throughput as the log grows to several GB.

The paper (§3.1): "We have found that both the production and the consumption have consistent
performance linear to the data size, up to many terabytes of data", and "the performance of
Kafka doesn't degrade with a larger data size", which is what makes a 7-day retention
feasible. This experiment shows whether that holds for Sluice on one machine.

One standalone broker (``bench.bench_broker.start_broker``: default 1 GiB segments, flushing
left to the OS), one topic with one partition, one confluent-kafka producer with librdkafka's
default batching (``acks=1``) and 200-byte messages:

* **produce**: messages are produced in chunks of ``chunk`` bytes (5 % of the target, at most
  100 MB) until the partition's ``.log`` files reach the target size (quick 1 GB, full 5 GB;
  less, with a note, when the disk is short). After each chunk the producer is flushed (every
  message acknowledged) and a sample records the log size, the acknowledged count and the
  time: the series of msg/s against log size. The first and last 10 % of the log are
  compared. The flush drains librdkafka's pipeline once per chunk, the same in every chunk.
* **lookup by time**: at every sample, with nothing in flight and the clock stopped,
  ``offsets_for_times`` (ListOffsets by timestamp; median of 3) of the first message and of
  the first message written after the previous sample.
* **consume**: the log is fsynced (so write-back does not run under the reads), then a slice
  of ``slice`` bytes (50 MB) is read at the start, middle and end of the log by one consumer
  with the ``consume`` experiment's Fetch size (200 KB) and a bounded read-ahead, first with
  the page cache as the writes left it ("warm"), then after evicting the log's pages ("cold"):
  ``posix_fadvise(DONTNEED)`` on each segment, which needs no root and touches no other file;
  if pages stay resident and this runs as root, ``/proc/sys/vm/drop_caches``. How much of each
  slice was resident before its read is measured with ``mincore(2)``. The time from ``assign``
  to the first message is recorded too: the broker's offset-index lookup at that position.

Rows go to ``Results`` under ``scale``; the series, reads and notes to
``build/bench/scale.json``, drawn by ``bench/plots.py`` as ``scale.png``. The data directory
is removed afterwards.

Standalone: ``python -m bench.bench_scale [--full] [--size 200MB] [--slice 10MB]``.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import mmap
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from bench.bench_broker import MESSAGE, start_broker
from bench.peers.kafka import FETCH
from bench.results import OUT_DIR, Results
from sluice.broker.log.log_config import LogConfig

EXPERIMENT = "scale"
SYSTEM = "sluice"
TOPIC = "scale"
QUICK_SIZE = 1_000_000_000
FULL_SIZE = 5_000_000_000
SLICE = 50_000_000
MAX_CHUNK = 100_000_000
SEGMENT = LogConfig().segment_bytes  # the broker's default log.segment.bytes, 1 GiB
DISK_RESERVE = 2_000_000_000  # left free for everyone else on the disk
DISK_FACTOR = 1.1  # log plus indexes, and what librdkafka sends past the target
WINDOW = 0.10  # "first" and "last" part of the log compared


# -- sizes ---------------------------------------------------------------------------------


def parse_size(text: str) -> int:
    """Bytes in ``"5GB"``, ``"200MB"``, ``"1GiB"``, ``"5e9"`` (decimal units unless ``i``)."""
    units = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
             "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}  # fmt: skip
    raw = text.strip().upper().replace(" ", "")
    number = raw.rstrip("KMGTIB")
    unit = raw[len(number) :]
    try:
        if unit not in units:
            raise ValueError(unit)
        return int(float(number) * units[unit])
    except ValueError:
        raise ValueError(
            f"size: expected a number and B, KB, MB, GB, MiB or GiB; found {text!r}"
        ) from None


def fit_to_disk(target: int, free: int) -> tuple[int, str | None]:
    """``target``, or less with a note when ``free`` bytes cannot hold it and the reserve."""
    if target * DISK_FACTOR + DISK_RESERVE <= free:
        return target, None
    fitted = int((free - DISK_RESERVE) / DISK_FACTOR)
    if fitted < 10_000_000:
        raise RuntimeError(
            f"scale: {free / 1e9:.1f} GB free on the disk; need at least "
            f"{(10_000_000 * DISK_FACTOR + DISK_RESERVE) / 1e9:.1f} GB"
        )
    return fitted, (
        f"target cut from {target / 1e9:.2f} GB to {fitted / 1e9:.2f} GB: "
        f"{free / 1e9:.1f} GB free on the disk, {DISK_RESERVE / 1e9:.0f} GB kept free"
    )


def segment_files(partition_dir: Path) -> list[Path]:
    """The partition's ``.log`` files in offset order (names are zero-padded base offsets)."""
    return sorted(partition_dir.glob("*.log"))


def log_size(partition_dir: Path) -> tuple[int, int]:
    """(bytes in the ``.log`` files, number of segments)."""
    total, count = 0, 0
    for path in segment_files(partition_dir):
        with contextlib.suppress(FileNotFoundError):
            total += path.stat().st_size
            count += 1
    return total, count


def rss(pid: int) -> int:
    """Resident memory of process ``pid`` in bytes (0 when unknown)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def meminfo() -> dict[str, int]:
    """``/proc/meminfo`` in bytes (empty where there is none)."""
    out: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            name, _, rest = line.partition(":")
            fields = rest.split()
            if fields and fields[0].isdigit():
                out[name] = int(fields[0]) * (1024 if fields[1:] == ["kB"] else 1)
    return out


# -- the page cache ------------------------------------------------------------------------

_libc: Any = None


def _load_libc() -> Any:
    global _libc
    if _libc is None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]  # fmt: skip
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        _libc = libc
    return _libc


def resident_pages(path: Path, start: int, end: int) -> tuple[int, int]:
    """(pages of ``path``'s bytes ``start``..``end`` in the page cache, pages in that range),
    by ``mincore(2)`` on a read-only mapping (which reads nothing)."""
    page = mmap.PAGESIZE
    start -= start % page
    length = end - start
    if length <= 0:
        return 0, 0
    libc = _load_libc()
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, start)
        if addr is None or addr == ctypes.c_void_p(-1).value:
            raise OSError(ctypes.get_errno(), f"mmap {path}")
        try:
            pages = (length + page - 1) // page
            vec = (ctypes.c_ubyte * pages)()
            if libc.mincore(addr, length, vec) != 0:
                raise OSError(ctypes.get_errno(), f"mincore {path}")
            flags = bytes(vec)
            return pages - flags.count(0), pages
        finally:
            libc.munmap(addr, length)
    finally:
        os.close(fd)


def resident_fraction(files: list[Path], start: int, end: int) -> float | None:
    """Fraction of bytes ``start``..``end`` of the log (its segments laid end to end) in the
    page cache; None when it cannot be measured here."""
    resident = total = 0
    base = 0
    try:
        for path in files:
            size = path.stat().st_size
            lo, hi = max(start, base), min(end, base + size)
            if lo < hi:
                r, t = resident_pages(path, lo - base, hi - base)
                resident, total = resident + r, total + t
            base += size
    except (OSError, AttributeError):  # no mincore (not Linux), or a segment went away
        return None
    return resident / total if total else None


def flush(files: list[Path]) -> float:
    """fsync every segment; seconds taken."""
    start = time.perf_counter()
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return time.perf_counter() - start


def evict(files: list[Path], allow_drop_caches: bool) -> str:
    """Drop the log's pages from the page cache; returns how (for the notes)."""
    flush(files)  # DONTNEED leaves dirty pages alone
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    total = sum(p.stat().st_size for p in files)
    left = resident_fraction(files, 0, total)
    how = "posix_fadvise(DONTNEED) on each segment"
    if left is None or left < 0.05:
        return how
    drop = Path("/proc/sys/vm/drop_caches")
    if allow_drop_caches and os.geteuid() == 0 and os.access(drop, os.W_OK):
        os.sync()
        try:
            drop.write_text("1\n")
        except OSError as e:
            return f"{how} left {left:.0%} resident; {drop}: {e}; reads not cold"
        return f"{how} left {left:.0%} resident; then sync and {drop} (root)"
    return f"{how} left {left:.0%} resident (not root: caches not dropped); reads not cold"


# -- produce -------------------------------------------------------------------------------


class Lookup:
    """``offsets_for_times`` on a consumer of its own, timed."""

    def __init__(self, bootstrap: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-scale-lookup",
                                  "enable.auto.commit": False})  # fmt: skip

    def __call__(self, timestamp_ms: int) -> tuple[float, int]:
        """(ms taken, median of 3; offset found) for the first message at or after
        ``timestamp_ms``."""
        times, offset = [], -1
        for _ in range(3):
            start = time.perf_counter()
            found = self.consumer.offsets_for_times([TopicPartition(TOPIC, 0, timestamp_ms)], 30)
            times.append((time.perf_counter() - start) * 1000)
            offset = found[0].offset
        return sorted(times)[1], offset

    def close(self) -> None:
        self.consumer.close()


def produce_until(bootstrap: str, partition_dir: Path, target: int, chunk: int,
                  lookup: Lookup, broker_pid: int) -> list[dict[str, Any]]:  # fmt: skip
    """Produce until the log holds ``target`` bytes, sampling every ``chunk`` bytes.

    A chunk is the messages produced since the last sample; at each sample the producer is
    flushed (every message acknowledged: that time counts as producing), then the log is
    measured and the lookups run with nothing else in flight, so they time the broker's
    lookup rather than a wait behind Produce requests; the clock is stopped while they run."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1})  # default batching
    payload = os.urandom(MESSAGE)
    acked = [0]
    failed: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is None:
            acked[0] += 1
        else:
            failed.append(err)

    # Warm-up: connection and metadata before the clock starts; offset 0 is this message.
    producer.produce(TOPIC, payload)
    if producer.flush(30) != 0:
        raise RuntimeError("scale: the warm-up message was not acknowledged in 30 s")
    time.sleep(0.01)  # the first counted message gets a later timestamp (ms)
    first_ts = int(time.time() * 1000)
    recent_ts = first_ts
    lookup(first_ts)  # the lookup consumer's connection, too
    samples: list[dict[str, Any]] = []
    deadline = time.monotonic() + 600 + target / 2e6  # 2 MB/s at worst
    start = time.perf_counter()
    paused = 0.0

    def sample() -> int:
        nonlocal recent_ts, paused
        if producer.flush(120) != 0 or failed:
            raise RuntimeError(f"scale: {len(failed)} failed or unacknowledged messages"
                               + (f"; first: {failed[0]}" if failed else ""))  # fmt: skip
        now = time.perf_counter()
        size, segments = log_size(partition_dir)
        info = meminfo()
        row: dict[str, Any] = {
            "seconds": round(now - start - paused, 4), "messages": acked[0], "log_bytes": size,
            "segments": segments, "dirty_bytes": info.get("Dirty", 0),
            "writeback_bytes": info.get("Writeback", 0), "broker_rss_bytes": rss(broker_pid),
        }  # fmt: skip
        now_ts = int(time.time() * 1000)
        row["lookup_first_ms"], row["lookup_first_offset"] = lookup(first_ts)
        row["lookup_recent_ms"], row["lookup_recent_offset"] = lookup(recent_ts)
        recent_ts = now_ts  # the next sample looks up the messages written just after this one
        samples.append(row)
        paused += time.perf_counter() - now
        return size

    sample()
    produced = 0
    next_at = max(1, chunk // (MESSAGE + 10))  # about 10 B of batch overhead per message
    while True:
        try:
            producer.produce(TOPIC, payload, on_delivery=on_delivery)
            produced += 1
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
        if produced < next_at:
            continue
        size = sample()
        if size >= target:
            return samples
        if time.monotonic() > deadline:
            raise RuntimeError(f"scale: {size / 1e9:.2f} GB of {target / 1e9:.2f} GB written "
                               "before the deadline")  # fmt: skip
        per_message = size / max(1, acked[0])
        next_at = produced + max(1, int(chunk / per_message))


def window_rate(samples: list[dict[str, Any]], first: bool, part: float = WINDOW) -> float:
    """msg/s over the first (or last) ``part`` of the log, from the samples bounding it."""
    final = samples[-1]["log_bytes"]
    if first:
        a = samples[0]
        b = next(s for s in samples if s["log_bytes"] >= part * final)
    else:
        a = [s for s in samples if s["log_bytes"] <= (1 - part) * final][-1]
        b = samples[-1]
    if b["seconds"] <= a["seconds"]:
        return float("nan")
    return (b["messages"] - a["messages"]) / (b["seconds"] - a["seconds"])


# -- consume -------------------------------------------------------------------------------


def slice_consumer(bootstrap: str) -> Consumer:
    """A consumer with the ``consume`` experiment's Fetch size, about 1,000 messages (200 KB)
    per Fetch, but read-ahead bounded (librdkafka's default prefetches up to 64 MB beyond
    where the application is, which would read, and warm, the log past each slice; a full
    queue then postpones the next Fetch by ``fetch.queue.backoff.ms``, 1 s by default) and a
    short wait at the log's end (an outstanding long poll delays the next ``assign``)."""
    return Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-scale-{time.monotonic_ns()}",
        "enable.auto.commit": False, "fetch.max.bytes": FETCH,
        "max.partition.fetch.bytes": FETCH, "message.max.bytes": FETCH, "fetch.wait.max.ms": 10,
        "queued.min.messages": 10_000, "queued.max.messages.kbytes": 4096,
        "fetch.queue.backoff.ms": 5,
    })  # fmt: skip


def read_slice(consumer: Consumer, start: int, count: int) -> dict[str, Any]:
    """Read offsets ``start`` .. ``start + count`` (exclusive); seconds and ms to the first.

    Offsets are consecutive here (one producer, no transactions), so asking ``consume`` for
    no more than what is left returns as soon as it has arrived, even at the log's end."""
    stop = start + count
    consumer.assign([TopicPartition(TOPIC, 0, start)])
    began = time.perf_counter()
    deadline = began + max(120.0, count / 1000)
    first: float | None = None
    seen, last = 0, start - 1
    try:
        while last < stop - 1:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"scale: read {seen:,} of {count:,} from {start:,} in time")
            for msg in consumer.consume(min(1000, stop - 1 - last), timeout=1.0):
                offset = msg.offset()
                if msg.error() is not None or not start <= offset < stop:
                    continue  # an error event, or fetched for another slice or ahead
                if first is None:
                    first = time.perf_counter() - began
                seen += 1
                last = max(last, offset)
        seconds = time.perf_counter() - began
    finally:
        consumer.unassign()
    return {"start_offset": start, "count": count, "seen": seen, "seconds": seconds,
            "rate": seen / seconds, "first_ms": (first or 0.0) * 1000}  # fmt: skip


def read_positions(consumer: Consumer, files: list[Path], end_offset: int, slice_bytes: int,
                   cache: str) -> list[dict[str, Any]]:  # fmt: skip
    """A ``slice_bytes`` slice at the start, middle and end of the log; ``cache`` labels it."""
    total = sum(p.stat().st_size for p in files)
    per_message = total / end_offset
    count = max(1, min(end_offset // 3, int(slice_bytes / per_message)))
    starts = {"start": 0, "middle": (end_offset - count) // 2, "end": end_offset - count}
    reads = []
    for position, offset in starts.items():
        resident = resident_fraction(files, int(offset * per_message),
                                     int((offset + count) * per_message))  # fmt: skip
        read = read_slice(consumer, offset, count)
        reads.append({"position": position, "cache": cache, "resident": resident, **read})
        print(f"  scale: {position:<6} {cache}: {read['rate']:>10,.0f} msg/s, first message "
              f"{read['first_ms']:.1f} ms, resident before "
              f"{'?' if resident is None else f'{resident:.0%}'}", flush=True)  # fmt: skip
    return reads


# -- the experiment ------------------------------------------------------------------------


def run(results: Results, quick: bool, size: int | None = None, slice_bytes: int = SLICE,
        out_dir: Path = OUT_DIR, work_parent: Path = Path("."),
        allow_drop_caches: bool = True) -> dict[str, Any]:  # fmt: skip
    """Write, sample, read; ``size`` overrides the mode's target (bytes). The broker's data
    goes under a new directory in ``work_parent``, removed at the end. Returns the record
    written to ``out_dir/scale.json``."""
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-scale-", dir=work_parent)).resolve()
    notes: list[str] = []
    wanted = size if size is not None else (QUICK_SIZE if quick else FULL_SIZE)
    target, cut = fit_to_disk(wanted, shutil.disk_usage(work).free)
    if cut is not None:
        print(f"  scale: {cut}", flush=True)
        notes.append(cut)
    chunk = max(1, min(MAX_CHUNK, target // 20))
    slice_bytes = max(1, min(slice_bytes, target // 10))
    broker = start_broker(work)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(timeout=30)
        del admin
        partition_dir = broker.log_dir / f"{TOPIC}-0"
        lookup = Lookup(broker.bootstrap)
        try:
            print(f"  scale: producing {target / 1e9:.2f} GB, sampling every "
                  f"{chunk / 1e6:.0f} MB", flush=True)  # fmt: skip
            samples = produce_until(broker.bootstrap, partition_dir, target, chunk, lookup,
                                    broker.proc.pid)  # fmt: skip
        finally:
            lookup.close()
        files = segment_files(partition_dir)
        end_offset = samples[-1]["messages"] + 1  # the warm-up message is offset 0
        flushed = flush(files)
        consumer = slice_consumer(broker.bootstrap)
        try:
            read_slice(consumer, 0, 1)  # connection and metadata; the pages are warm anyway
            reads = read_positions(consumer, files, end_offset, slice_bytes, "warm")
            how = evict(files, allow_drop_caches)
            reads += read_positions(consumer, files, end_offset, slice_bytes, "cold")
        finally:
            consumer.close()
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)

    memory = meminfo().get("MemTotal", 0)
    final = samples[-1]
    notes.append(
        f"{final['log_bytes'] / 1e9:.2f} GB log in {final['segments']} segment(s) of at most "
        f"{SEGMENT / 2**30:g} GiB; {memory / 2**30:.0f} GiB of RAM, so the whole log "
        + (
            "fits in the page cache: warm reads come from memory"
            if final["log_bytes"] < memory
            else "does not fit in the page cache"
        )  # fmt: skip
    )
    notes.append(f"before the reads the log was fsynced ({flushed:.1f} s); cold reads: {how}")
    notes.append(
        f"consume: {slice_bytes / 1e6:.0f} MB slices, 200 KB per Fetch, read-ahead bounded to 4 MB"
    )
    small = samples[1] if len(samples) > 1 else final
    notes.append(f"produce sampled every {chunk / 1e6:,.0f} MB; lookups by time timed at every "
                 f"sample, small log = {small['log_bytes'] / 1e6:,.0f} MB")  # fmt: skip
    record = {
        "quick": quick, "target_bytes": target, "chunk_bytes": chunk, "slice_bytes": slice_bytes,
        "message_bytes": MESSAGE, "memory_bytes": memory, "samples": samples, "reads": reads,
        "notes": notes,
    }  # fmt: skip
    report(results, record)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "scale.json").write_text(json.dumps(record, indent=1))
    return record


def report(results: Results, record: dict[str, Any]) -> None:
    """The ``scale`` rows from one run's record."""
    samples, final = record["samples"], record["samples"][-1]
    add = results.add

    def row(metric: str, value: float, unit: str) -> None:
        add(EXPERIMENT, SYSTEM, metric, value, unit)

    row("log size", final["log_bytes"] / 1e9, "GB")
    row(f"segments of at most {SEGMENT / 2**30:g} GiB", final["segments"], "")
    row("produce, whole log", final["messages"] / final["seconds"], "msg/s")
    first, last = window_rate(samples, True), window_rate(samples, False)
    row(f"produce, first {WINDOW * 100:.0f} % of the log", first, "msg/s")
    row(f"produce, last {WINDOW * 100:.0f} % of the log", last, "msg/s")
    row("produce, last/first", last / first, "ratio")
    reads = {(r["position"], r["cache"]): r for r in record["reads"]}
    for cache in ("warm", "cold"):
        for position in ("start", "middle", "end"):
            r = reads.get((position, cache))
            if r is not None:
                row(f"consume at the {position}, {cache} cache", r["rate"], "msg/s")
        if ("start", cache) in reads and ("end", cache) in reads:
            row(f"consume end/start, {cache} cache",
                reads["end", cache]["rate"] / reads["start", cache]["rate"], "ratio")  # fmt: skip
    for cache in ("warm", "cold"):
        for position in ("start", "middle", "end"):
            r = reads.get((position, cache))
            if r is not None:
                row(f"first message at the {position}, {cache} cache", r["first_ms"], "ms")
    for cache in ("warm", "cold"):
        fractions = [r["resident"] for r in record["reads"]
                     if r["cache"] == cache and r["resident"] is not None]  # fmt: skip
        if fractions:
            row(f"slices in the page cache before {cache} reads", 100 * min(fractions), "%")
    # The first sample after the start, against the last: ListOffsets by time as the log grew.
    small = samples[1] if len(samples) > 1 else samples[0]
    for which in ("first", "recent"):
        name = "the first message" if which == "first" else "a recent message"
        for when, s in (("small", small), ("full", final)):
            row(f"lookup by time of {name}, {when} log", s[f"lookup_{which}_ms"], "ms")
    for when, s in (("small", small), ("full", final)):
        row(f"broker resident memory, {when} log", s["broker_rss_bytes"] / 1e6, "MB")
    for note in record["notes"]:
        results.note(EXPERIMENT, note)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_scale",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument("--full", action="store_true", help=f"{FULL_SIZE / 1e9:.0f} GB "
                        f"(default {QUICK_SIZE / 1e9:.0f} GB)")  # fmt: skip
    parser.add_argument("--size", type=parse_size, help="log size to reach, e.g. 200MB")
    parser.add_argument("--slice", type=parse_size, default=SLICE, help="bytes read per position")
    parser.add_argument("--no-save", action="store_true", help="do not merge into results.json")
    args = parser.parse_args()
    results = Results()
    run(results, not args.full, args.size, args.slice)
    if not args.no_save:
        argv = " ".join(sys.argv[1:])
        path = results.save(f"python -m bench.bench_scale {argv}".strip(),
                            "full" if args.full else "quick")  # fmt: skip
        from bench import plots

        for png in plots.render(path.parent):
            print(f"plot {png}")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
