"""Where the broker's time goes: py-spy on a running Sluice broker under the benchmarks' load.

Three paths, each profiled for ``SECONDS`` (10 s quick, 30 s full) after a 2 s warm-up (the
first requests import codec modules and fill caches), 100 samples a second, the broker's
process sampled from outside (``py-spy record --pid``: no broker code changes):

* ``consume`` — confluent-kafka reading a topic written with librdkafka's default batching,
  with the peers' consumer settings (``bench.peers.kafka.CONSUMER``), again from the start as
  often as needed.
* ``fetch`` — the fetch-path benchmark's minimal client: Fetch v11 of 1 MiB, no long poll,
  responses read and discarded (``bench.bench_broker.raw_fetch_rate``), on a batch-50 topic.
* ``produce batch 1`` — librdkafka with ``batch.num.messages=1, linger.ms=0`` (one Produce
  request per message, pipelined), the peers' producer settings.

py-spy is meant to keep only samples where a thread is running, but in this container it keeps
threads blocked in ``Condition.wait``, an idle executor worker and the event loop in
``epoll``'s ``select`` too: a stack whose innermost frame is such a wait (``WAITS``) is counted
as waiting and left out, so the shares are of the broker's busy samples (the waiting share is
a row of its own). Each stack is put in one category of the per-request split by its
innermost frame that names one (``category``): ``read`` (the transport's receive, the stream
reader, the frame decoder), ``decode`` (request header and body decoding in
``broker/protocol``), ``dispatch`` (``Broker.handle_frame`` and the connection loop
themselves, request metrics), ``handler`` (the API handler and what it calls: log, replica
manager, record validation), ``encode`` (response encoding), ``write`` (flushing and writing
responses, ``sendfile``), ``event loop`` (asyncio's own scheduling, outside any of those) and
``other threads`` (everything not on the event loop's thread: the flusher, executors).

Output in ``build/bench/profiles/``: ``<path>.folded`` (py-spy's raw collapsed stacks, for
flamegraph tools or speedscope), ``<path>.txt`` (the split and the top functions by own time
and by total time) which ``bench.report`` puts in docs/performance.md, and result rows
``broker_profile / <path> / <category>`` in % of samples.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.bench_broker import load_average, produce, raw_fetch_rate, start_broker
from bench.results import OUT_DIR, Results

PROFILES = OUT_DIR / "profiles"
SECONDS = {True: 10.0, False: 30.0}  # quick, full: seconds of sampling per path
WARMUP = 2.0
RATE = 100  # samples per second
TOP = 15  # functions listed per table in <path>.txt
CATEGORIES = ("read", "decode", "dispatch", "handler", "encode", "write", "event loop",
              "other threads")  # fmt: skip
WAITING = "waiting (excluded)"
# Innermost frames that block rather than run: a thread parked on a lock or an event, an idle
# executor worker (blocked in SimpleQueue.get), the event loop in epoll_wait.
WAITS = ("Condition.wait (threading.py)", "Event.wait (threading.py)",
         "_worker (concurrent/futures/thread.py)", "EpollSelector.select (selectors.py)",
         "Thread._wait_for_tstate_lock (threading.py)")  # fmt: skip
PATHS = {
    "consume": "confluent-kafka consuming a default-batched topic (200 KB fetches)",
    "fetch": "Fetch v11 of 1 MiB by a minimal client (the fetch-path benchmark)",
    "produce batch 1": "librdkafka batch.num.messages=1, linger.ms=0 (a Produce per message)",
}

# (category, test on one frame "function (file)"), tried innermost frame first: the first
# frame that passes a test names the stack's category.
_WRITE = ("._flush ", "._write ", "StreamWriter.", "sendfile", "_write_ready", "drain",
          "_SelectorSocketTransport.write ", "_SelectorTransport.write",
          "broker/server/response_writer.py")  # fmt: skip
# The frames between the socket and a handler: the dispatcher, a connection's loop, the acceptor.
_DISPATCH = (
    "RequestDispatcher.handle_frame ",
    "Connection._read_loop ",
    "Connection.serve ",
    "Acceptor._on_connection ",
)
_READ = ("_read_ready", "StreamReader.", "FrameDecoder.", "data_received", "recv_into")
RULES: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("write", lambda f: any(w in f for w in _WRITE)),
    ("read", lambda f: any(r in f for r in _READ)),
    ("encode", lambda f: "broker/protocol/" in f and ("encode" in f or "build" in f
                                                     or "fetch_response" in f)),
    ("decode", lambda f: "broker/protocol/" in f or "decode_request" in f),
    ("dispatch", lambda f: any(d in f for d in _DISPATCH)
     or "metrics.py" in f and "record_request" in f),
    ("handler", lambda f: "broker/" in f),
)  # fmt: skip


@dataclass
class Profile:
    """Collapsed stacks of one path: ``stacks`` maps frames (outermost first, each
    ``"function (file)"`` with line numbers dropped) to samples."""

    stacks: Counter[tuple[str, ...]] = field(default_factory=Counter)

    @property
    def samples(self) -> int:
        return sum(self.stacks.values())

    @property
    def busy(self) -> int:
        """Samples not in a wait (``WAITS``)."""
        return sum(n for stack, n in self.stacks.items() if not waiting(stack))

    def split(self) -> dict[str, float]:
        """% of the busy samples per category (``CATEGORIES``, all present), then
        ``WAITING``: % of all samples that were waits."""
        counts: Counter[str] = Counter()
        for stack, n in self.stacks.items():
            counts[WAITING if waiting(stack) else category(stack)] += n
        busy = max(self.busy, 1)
        out = {c: 100 * counts[c] / busy for c in CATEGORIES}
        out[WAITING] = 100 * counts[WAITING] / max(self.samples, 1)
        return out

    def own(self) -> Counter[str]:
        """Busy samples per function where it was the innermost frame (its own time, with the
        C code it called)."""
        out: Counter[str] = Counter()
        for stack, n in self.stacks.items():
            if stack and not waiting(stack):
                out[stack[-1]] += n
        return out

    def total(self) -> Counter[str]:
        """Busy samples per function anywhere on the stack (counted once per stack)."""
        out: Counter[str] = Counter()
        for stack, n in self.stacks.items():
            if not waiting(stack):
                for frame in set(stack):
                    out[frame] += n
        return out


def parse_folded(lines: Iterable[str]) -> Profile:
    """py-spy's ``--format raw`` output (``frame;frame;... count`` per line, each frame
    ``function (file:line)``) as a ``Profile``, line numbers dropped."""
    profile = Profile()
    for line in lines:
        text, _, count = line.rstrip("\n").rpartition(" ")
        if not text or not count.isdigit():
            continue
        profile.stacks[tuple(_frame(f) for f in text.split(";"))] += int(count)
    return profile


def _frame(frame: str) -> str:
    """``f (a/b.py:12)`` -> ``f (a/b.py)``."""
    name, paren, where = frame.rpartition(" (")
    if not paren:
        return frame
    file, colon, line = where.rstrip(")").rpartition(":")
    return f"{name} ({file})" if colon and line.isdigit() else frame


def waiting(stack: tuple[str, ...]) -> bool:
    """Whether the innermost frame blocks (``WAITS``) rather than runs."""
    return bool(stack) and stack[-1] in WAITS


def category(stack: tuple[str, ...]) -> str:
    """The per-request split category of one stack (see the module docstring)."""
    if not any("run_forever" in f for f in stack):
        return "other threads"
    for frame in reversed(stack):
        for name, test in RULES:
            if test(frame):
                return name
    return "event loop"


def summary(path: str, profile: Profile, what: str, rate: str) -> str:
    """The text of ``<path>.txt``: what ran, the split, the top functions."""
    total = max(profile.busy, 1)
    lines = [f"{path}: {what}; {rate}",
             f"{profile.busy} busy samples ({profile.samples - profile.busy} more in a wait, "
             "left out); % of the busy ones",
             "split: " + ", ".join(f"{c} {v:.0f}%" for c, v in profile.split().items()),
             "", "own time (innermost frame):"]  # fmt: skip
    lines += [f"  {100 * n / total:5.1f}%  {f}" for f, n in profile.own().most_common(TOP)]
    lines += ["", "total time (anywhere on the stack), below the event loop:"]
    ranked = [(f, n) for f, n in profile.total().most_common() if not _scaffolding(f)]
    lines += [f"  {100 * n / total:5.1f}%  {f}" for f, n in ranked[:TOP]]
    return "\n".join(lines) + "\n"


def _scaffolding(frame: str) -> bool:
    """Frames every sample of the loop's thread has (runpy, the CLI, asyncio's run loop)."""
    return any(s in frame for s in ("<frozen runpy>", "sluice/__main__.py", "sluice/cli/",
                                    "asyncio/runners.py", "run_until_complete", "run_forever",
                                    "_run_once", "Handle._run", "threading.py"))  # fmt: skip


def py_spy() -> str:
    """The py-spy executable (installed into this environment with pip when missing)."""
    found = shutil.which("py-spy", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                         os.environ.get("PATH", "")]))  # fmt: skip
    if found:
        return found
    print("  pip install py-spy", flush=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "py-spy"], check=True)
    return str(Path(sys.executable).parent / "py-spy")


def record(pid: int, seconds: float, out: Path) -> Profile:
    """py-spy on ``pid`` for ``seconds``: the collapsed stacks, also kept in ``out``."""
    subprocess.run(
        [py_spy(), "record", "--pid", str(pid), "--duration", str(math.ceil(seconds)),
         "--rate", str(RATE), "--format", "raw", "--output", str(out)],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return parse_folded(out.read_text().splitlines())


def _in_background(
    load: Callable[[float], float], seconds: float
) -> tuple[threading.Thread, list[float]]:
    """``load(seconds)`` in a daemon thread; its result lands in the list."""
    rate: list[float] = []
    thread = threading.Thread(target=lambda: rate.append(load(seconds)), daemon=True)
    thread.start()
    return thread, rate


def run(results: Results, quick: bool, loop: str = "asyncio") -> None:
    from bench.peers.kafka import KafkaDriver

    seconds = SECONDS[quick]
    span = WARMUP + seconds + 1.5  # the load outlasts the sampling on both ends
    PROFILES.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="sluice-profile-", dir="."))
    broker = start_broker(work, loop)
    assert broker.pid is not None
    suffix = "" if loop == "asyncio" else f" ({loop})"
    try:
        driver = KafkaDriver("sluice", broker.bootstrap)
        count = 1_000_000
        produce(broker.bootstrap, "profile-default", count, {})
        produce(broker.bootstrap, "profile-fetch", count, {"batch.num.messages": 50,
                                                          "linger.ms": 5})  # fmt: skip

        def consume(span: float) -> float:
            return driver.consume("profile-default", count, span * 3, span).rate

        def fetch(span: float) -> float:
            return raw_fetch_rate(broker.port, "profile-fetch", count, span)

        def produce_one(span: float) -> float:
            return _produce_for(driver, "profile-batch-1", span)

        loads: dict[str, tuple[Callable[[float], float], str]] = {
            "consume": (consume, "msg/s"), "fetch": (fetch, "MB/s"),
            "produce batch 1": (produce_one, "msg/s"),
        }  # fmt: skip
        for path, (load, unit) in loads.items():
            thread, rate = _in_background(load, span)
            time.sleep(WARMUP)
            slug = path.replace(" ", "-") + ("" if loop == "asyncio" else f"-{loop}")
            profile = record(broker.pid, seconds, PROFILES / f"{slug}.folded")
            thread.join(span * 4)
            reached = f"{rate[0]:,.0f} {unit} under the profiler" if rate else "load failed"
            text = summary(path + suffix, profile, PATHS[path], reached +
                           f", load average {load_average()}")  # fmt: skip
            (PROFILES / f"{slug}.txt").write_text(text)
            print("\n".join("    " + line for line in text.splitlines()[:3]), flush=True)
            for name, share in profile.split().items():
                results.add("broker_profile", path + suffix, name, share, "%")
        results.note("broker_profile", f"py-spy {RATE} Hz for {seconds:.0f} s per path after a "
                     f"{WARMUP:.0f} s warm-up, busy samples only; top functions in "
                     "build/bench/profiles/*.txt")  # fmt: skip
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


def _produce_for(driver: Any, topic: str, seconds: float) -> float:
    """msg/s of batch-1 produce (``bench.peers.kafka`` settings) kept up for ``seconds``."""
    from confluent_kafka import Producer

    from bench.peers.kafka import PRODUCER, SETTINGS

    driver.create(topic)
    producer = Producer({"bootstrap.servers": driver.bootstrap, **PRODUCER,
                         **SETTINGS["batch 1"]})  # fmt: skip
    payload = os.urandom(200)
    sent = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(100):
            try:
                producer.produce(topic, payload)
                sent += 1
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(120)
    return sent / (time.perf_counter() - start)
