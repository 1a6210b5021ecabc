"""The measured part of ``docs/performance.md``, generated from the benchmark results.

    python -m bench.report                                  # print the markdown
    python -m bench.report --write docs/performance.md      # replace the text between the markers

Sources, all in ``build/bench/``: ``results.json`` (every measured number; a repeated one
shows as its median with ``(min–max)`` of its runs), ``machine.json`` (the machine, and per
experiment the command, mode, date and notes: see ``bench.results``), ``peers.json`` when
present (message counts, versions, repetitions and client settings of the peers run), and
``profiles/*.txt`` when present (``bench.bench_profile``'s top lines, quoted under the profile
split). The paper's own figures are ``bench.plots``'s constants. The prose below describes
each experiment and what stays true whatever the numbers are; every number in the output
comes from those files, or is a parameter of the mode the experiment ran in (``SETUP``,
mirroring each module's ``run``).

``--write PAGE`` replaces only what lies between ``<!-- bench:begin -->`` and
``<!-- bench:end -->`` (each exactly once, in that order), byte for byte outside them; without
the markers it stops with an error and writes nothing. What the page says outside the markers
(how it is made, the reading of the runs, experiments not rerun) is written by hand and stays.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.plots import PAPER_CONSUME, PAPER_PRODUCE, PAPER_STORAGE
from bench.report_table import (
    Context,
    Label,
    _cell,
    _finite,
    _join,
    _sentence,
    context,
    fmt,
    fmt_row,
    pair_ratios,
    ratio_rows,
    table,
)
from bench.results import OUT_DIR, Result, load_results

BEGIN = "<!-- bench:begin -->"
END = "<!-- bench:end -->"
PAGE = "docs/performance.md"  # the page the project keeps the generated part in

# The make targets that run these commands (see the Makefile).
MAKE_TARGETS = {
    "python -m bench.run --quick": "make bench",
    "python -m bench.run --full": "make bench-full",
    "python -m bench.run --quick --only peers": "make bench-peers",
}
PROFILE_LINES = 12  # lines of each profile's top-functions table quoted on the page

# Parameters of each mode that no result row carries (they are in each module's run()).
SETUP = {
    "log": {"quick": "256 MiB", "full": "1 GiB"},
    "fetch_path": {"quick": "1 M", "full": "5 M"},
    "offsets_article": {"quick": "20 k", "full": "100 k"},
    "partition_strategy": {"quick": "8 s, 16 s and 24 s", "full": "20 s, 40 s and 60 s"},
    "transactional_produce": {"quick": "3,000", "full": "10,000"},
    "log_cleaner": {"quick": "100 MB", "full": "1 GB"},
    # bench.bench_iceberg's WRITES (splits per load) and COMMIT_FILES
    "iceberg_compaction": {"quick": "24", "full": "80"},
    "iceberg_commit": {"quick": "1, 10 and 100", "full": "1, 10, 100 and 1,000"},
    # bench.bench_cluster's QUICK and FULL: messages timed one at a time; partition counts
    "cluster_latency": {"quick": "1,000", "full": "10,000"},
    "cluster_partitions": {"quick": "300, 1,500 and 4,000", "full": "300, 1,500 and 4,000"},
}


class MarkersError(ValueError):
    """The page lacks the markers, or has them more than once or out of order."""


# -- sections ------------------------------------------------------------------------------


def peers_section(ctx: Context) -> list[str]:
    out = ["**The paper's §5, one producer and one consumer, 200-byte messages.** Sluice writes "
           "to disk; Tansu, a Rust Kafka-compatible broker, keeps everything in memory; "
           "RabbitMQ with persistent messages on a durable queue; ActiveMQ with KahaDB over "
           "STOMP. The Kafka-protocol systems are driven by the same confluent-kafka client "
           "(`acks=1`); \"batch 1\", \"batch 50\" and librdkafka's \"default batching\" are "
           "the ways each topic or queue was written." + _peer_counts(ctx)]  # fmt: skip
    paper_produce = {f"{mode}": fmt(v, "msg/s") for mode, v in PAPER_PRODUCE.items()}
    blocks: list[tuple[str, str, str | None, dict[str, dict[str, str]] | None]] = [
        ("produce", "produce (more is better)", "max", {"paper: Kafka": paper_produce}),
        ("consume", "consume (more is better)", "max",
         {"paper: Kafka": {"from batch 50 writes": fmt(PAPER_CONSUME, "msg/s")}}),
        ("first_message", "first message after subscribing (less is better)", "min", None),
        ("storage_overhead", "bytes on disk per message beyond the payload (less is better)",
         "min", None),
    ]  # fmt: skip
    for experiment, corner, best, extra in blocks:
        rows = ctx.rows.get(experiment)
        if rows:
            out += ["", *table(rows, transpose=True, best=best, label=_peer_label(experiment),
                               extra=extra, corner=corner)]  # fmt: skip
    ratios = [f"produce {r}" for r in pair_ratios(ctx, "produce", "sluice", "tansu", "msg/s")]
    ratios += [f"consume {r}" for r in pair_ratios(ctx, "consume", "sluice", "tansu", "msg/s")]
    if ratios:
        out += ["", f"Sluice/Tansu: {_join(ratios)}."]
    paper_storage = _join([f"{k} {v} B" for k, v in PAPER_STORAGE.items()])
    out += ["", f"The paper's storage overhead per message: {paper_storage}. A consume figure "
            "marked \"timed out\" is the rate reached when the read's deadline hit. Sluice's "
            "first message after `subscribe()` waits for the group's "
            "`group.initial.rebalance.delay.ms`, as in Kafka; Tansu holds the first join for "
            "half the session timeout. RabbitMQ's and ActiveMQ's figures include an fsync behind "
            "every publisher confirm or receipt, which they do not let a client turn off; the "
            "Kafka-protocol brokers flush asynchronously, as the paper's Kafka did. The Python "
            "clients (pika, stomp.py) may limit RabbitMQ and ActiveMQ too."]  # fmt: skip
    return out


def _peer_label(experiment: str) -> Label:
    def label(r: Result) -> tuple[str, str]:
        if experiment == "first_message":
            return "time to the first message", r.metric  # "after subscribe" ...
        if experiment == "storage_overhead":
            mode = r.metric.removeprefix("written ").split(",")[0]
            return mode, r.metric.split("n/a:")[1].strip() if "n/a:" in r.metric else ""
        name, _, rest = r.metric.partition(" (")  # "(TIMED OUT: 1,234 of 20,000 in 30s)"
        return name.removesuffix(", msg/s"), rest.rstrip(")").lower()

    return label


def _peer_counts(ctx: Context) -> str:
    records = ctx.sidecars.get("peers") or {}
    runs = records.get("produce", [])
    if not runs:
        return ""
    by_system: dict[str, list[str]] = {}
    seen: set[tuple[str, str, int]] = set()
    for run in runs:
        key = (run["system"], run["mode"], run["count"])
        if key not in seen:
            seen.add(key)
            by_system.setdefault(run["system"], []).append(f"{run['count']:,} ({run['mode']})")
    groups: dict[str, list[str]] = {}
    for system, counts in by_system.items():
        groups.setdefault(_join(counts), []).append(system)
    text = "; ".join(f"{' and '.join(systems)} {counts}" for counts, systems in groups.items())
    what = "Messages written"
    if records.get("repeats"):
        what += (f" per run (scaled to each system's rate so that every timed phase lasts at "
                 f"least {records.get('phase_seconds', 0):.0f} s; each figure is the median "
                 f"of {records['repeats']} runs, (min–max) beside it, the systems taking turns)"
                 )  # fmt: skip
    versions = records.get("versions", {})
    if versions:
        text += ". Versions: " + "; ".join(f"{s}: {v}" for s, v in versions.items())
    client = records.get("client")
    if client:
        text += (f". Client: {client.get('client', '?')}, the same settings for every "
                 "Kafka-protocol broker: producer " + _settings(client.get("producer", {}))
                 + "; per way " + "; ".join(f"{m}: {_settings(v)}" for m, v in
                                             client.get("producer_modes", {}).items())
                 + "; consumer " + _settings(client.get("consumer", {})))  # fmt: skip
    return f" {what}: {text}."


def _settings(settings: Mapping[str, Any]) -> str:
    return "`" + ", ".join(f"{k}={v}" for k, v in settings.items()) + "`"


def log_section(ctx: Context) -> list[str]:
    size = SETUP["log"][ctx.mode("log_append")]
    out = [f"**The storage engine against the disk** (`broker/log` in-process, {size} per batch "
           "size): `Log.append` (validate the CRC, assign offsets, index) against `os.write` of "
           "the same bytes; `Log.read` (index lookup, whole-batch slice, read) against "
           "`os.pread` of the same ranges."]  # fmt: skip
    for experiment in ("log_append", "log_read"):
        if ctx.rows.get(experiment):
            out += ["", *table(ctx.rows[experiment])]
    return out


def transactions_section(ctx: Context) -> list[str]:
    """Transactional produce against the idempotent producer (``bench.bench_transactions``)."""
    batches = SETUP["transactional_produce"][ctx.mode("transactional_produce")]
    rows = ctx.rows["transactional_produce"]
    out = [f"**Transactions** (KIP-98; `python -m bench.run --only transactions`): {batches} "
           "batches of 100 records of 100 bytes to one partition of a standalone broker, each "
           "batch flushed (one Produce request), by the idempotent producer and by a "
           "transactional one committing every 1, 10 or 100 batches; same client settings, "
           "same bytes. A transaction adds AddPartitionsToTxn, EndTxn, two "
           "`__transaction_state` writes and a commit marker; its cost is spread over the "
           "batches it holds."]  # fmt: skip
    out += ["", *table([r for r in rows if r.unit != "ratio"], transpose=True)]
    return out


def cleaner_section(ctx: Context) -> list[str]:
    """The cleaner's throughput and a compacted topic's read speed (``bench.bench_cleaner``)."""
    size = SETUP["log_cleaner"][ctx.mode("log_cleaner")]
    rows = ctx.rows["log_cleaner"]
    out = [f"**Log compaction** (`python -m bench.run --only cleaner`, `broker/log` in-process): "
           f"a {size} `cleanup.policy=compact` log of 100-byte values over 10,000 random keys "
           "cleaned in one pass (the broker's default 128 MiB key map; MB/s of log read by the "
           "pass: offset map, rewrite, swap), then read from the start with 1 MiB reads, "
           "compacted and uncompacted (both in the page cache)."]  # fmt: skip
    out += ["", *table([r for r in rows if r.unit != "ratio"], transpose=True)]
    return out


def iceberg_section(ctx: Context) -> list[str]:
    """Compaction and one commit of an Iceberg table (``bench.bench_iceberg``)."""
    splits = SETUP["iceberg_compaction"][ctx.mode("iceberg_compaction")]
    files = SETUP["iceberg_commit"][ctx.mode("iceberg_commit")]
    out = [f"**Iceberg tables** (`python -m bench.run --only iceberg`, in-process, the embedded "
           "SQLite catalog on local disk): ten loads of "
           f"{splits} splits of 3,000 records over three event-time days leave one small file "
           "per split and day in a `day(event_time)` table; `sluice table compact`'s "
           "`compact` rewrites each day's files into one in one snapshot (MB/s of data files "
           f"rewritten). A load's commit of {files} files through `IcebergRun.commit` (each "
           "file checked against its footer, then one conditional catalog swap)."]  # fmt: skip
    for experiment in ("iceberg_compaction", "iceberg_commit"):
        if ctx.rows.get(experiment):
            out += ["", *table(ctx.rows[experiment], transpose=experiment == "iceberg_commit")]
    return out


def fetch_section(ctx: Context) -> list[str]:
    count = SETUP["fetch_path"][ctx.mode("fetch_path")]
    rows = ctx.rows["fetch_path"]
    out = [f"**The fetch path**: Fetch v11 responses of 1 MiB sent with `sendfile` from the "
           f"segment file ({count} messages of 200 bytes), read by a minimal client that "
           "discards them, against a raw loopback `sendfile` of the same segment."]  # fmt: skip
    return [*out, "", *table(rows), *limits_sentence(ctx)]


def limits_sentence(ctx: Context) -> list[str]:
    """Sluice end to end (the peers experiment: broker + confluent-kafka client) as fractions
    of the machine's limits measured in the same run: sequential write (``os.write`` of 1 MiB
    batches) and loopback ``sendfile``."""
    disk = ctx.value("log_append", "os.write", "1024 KiB batches")
    wire = ctx.value("fetch_path", "raw os.sendfile", "loopback")
    produce = ctx.value("produce", "sluice", "default batching, MB/s")
    consume = ctx.value("consume", "sluice", "from default batching writes, msg/s")
    size = (ctx.sidecars.get("peers") or {}).get("message_bytes")
    parts = []
    if disk and produce is not None and _finite(disk) and _finite(produce):
        parts.append(f"producing with librdkafka's default batching moves "
                     f"{fmt(produce, 'MB/s')} of payload, {fmt(produce / disk, 'ratio')} the "
                     "disk's sequential write bandwidth")  # fmt: skip
    if wire and consume is not None and size and _finite(wire) and _finite(consume):
        mb = consume * size / 1e6
        parts.append(f"consuming that topic moves {fmt(mb, 'MB/s')}, "
                     f"{fmt(mb / wire, 'ratio')} a raw loopback `sendfile`")  # fmt: skip
    if not parts:
        return []
    return ["", _sentence("End to end, through the broker and the Python client: "
                          + "; ".join(parts))]  # fmt: skip


def profile_section(ctx: Context) -> list[str]:
    """The per-request split of the broker's busy time on each profiled path, and each
    profile's top functions (``profiles/<path>.txt``, first lines)."""
    rows = ctx.rows["broker_profile"]
    out = ["**Where the broker's time goes** (`python -m bench.run --only profile`: py-spy "
           "sampling the broker process under each path's load, no broker changes; % of the "
           "samples in which the broker was busy, by the innermost frame's part of a request: "
           "read, decode, dispatch, handler, encode, write, the event loop's own scheduling, "
           "and threads other than the event loop's)."]  # fmt: skip
    out += ["", *table(rows, transpose=True, corner="share of busy samples")]
    texts: Mapping[str, str] = ctx.sidecars.get("profiles") or {}
    for name, text in texts.items():
        first = text.partition("\n")[0]
        out += ["", f"`{name}` — {first}", "", "```", *profile_excerpt(text), "```"]
    return out


def profile_excerpt(text: str, lines: int = PROFILE_LINES) -> list[str]:
    """The first ``lines`` entries of each table (own time, total time) in a profile's text."""
    out: list[str] = []
    taken = 0
    for line in text.splitlines()[1:]:
        if line.endswith(":") and not line.startswith(" "):  # a table's title
            out.append(line)
            taken = 0
        elif line.startswith("  ") and taken < lines:
            out.append(line)
            taken += 1
    return out


def scale_section(ctx: Context) -> list[str]:
    rows = ctx.rows["scale"]
    out = ["**Throughput as the log grows.** The paper (§3.1): \"both the production and the "
           "consumption have consistent performance linear to the data size, up to many "
           "terabytes of data\". One partition, one producer with librdkafka's default batching "
           "(`acks=1`), 200-byte messages, written until the log reached the size below, "
           "produce msg/s sampled as it grew; then a slice read at the start, middle and end of "
           "the log, with the page cache as the writes left it (warm) and after evicting the "
           "log from it (cold); and lookups by time (`offsets_for_times`) of the first and of a "
           "recent message, on a small log and on the full one."]  # fmt: skip
    out += ["", *table(rows, transpose=True)]
    verdicts = []
    for system, metric, what in (("sluice", "produce, last/first", "produce in the last 10 % "
                                  "of the log against the first 10 %"),
                                 ("sluice", "consume end/start, warm cache",
                                  "consume at the end against the start, warm cache"),
                                 ("sluice", "consume end/start, cold cache",
                                  "consume at the end against the start, cold cache")):  # fmt: skip
        ratio = ctx.value("scale", system, metric)
        if ratio is not None and _finite(ratio):
            within = "within" if abs(ratio - 1) <= 0.10 else "outside"
            verdicts.append(f"{what}: {fmt(ratio, 'ratio')} ({within} ±10 %)")
    if verdicts:
        out += ["", _sentence("; ".join(verdicts))]
    return out


def offsets_section(ctx: Context) -> list[str]:
    count = SETUP["offsets_article"][ctx.mode("offsets_article")]
    out = [f"**The offsets article's experiment** (`python -m bench.bench_offsets`: {count} "
           "messages in 4 partitions, the consumer killed with SIGKILL three times mid-way and "
           "rerun until done). Auto-commit stores offsets on poll and flushes its output every "
           "1,000 messages; commit after processing fsyncs its output, then commits, every "
           "1,000; Sluice's atomic load is killed mid-read and rerun."]  # fmt: skip
    return [*out, "", *table(ctx.rows["offsets_article"])]


def assignors_section(ctx: Context) -> list[str]:
    rows = ctx.rows["partition_strategy"]
    times = SETUP["partition_strategy"][ctx.mode("partition_strategy")]
    out = ["**The partition-strategy article's experiment** (`python -m bench.bench_assignors`: "
           "t0, t1, t2 with 4, 4 and 5 partitions; C0 reads t0, C1 t0 and t1, C2 all three; C0 "
           f"leaves and returns under a steady 2,000 msg/s; the clock marks {times} for the "
           "leave, the return and the end). Partitions moved are counted from the group's "
           "assignment before and after each change and set against what "
           "`pipeline/consumer/assignors.py` predicts for the same membership; librdkafka's sticky "
           "assignor is the cooperative one, which revokes only what moves. Its rebalance "
           "time on C0's return includes one `heartbeat.interval.ms` (1 s here): the members "
           "that revoked partitions rejoin at once, but C0 learns of that second rebalance "
           "only from its next heartbeat (the classic group protocol has no push; Kafka's "
           "coordinator behaves the same, traced in `broker/groups/coordinator.py`)."]  # fmt: skip
    strategies = list(dict.fromkeys(r.system for r in rows))
    sentences = []
    for what in ("partitions moved", "predicted moves", "partitions revoked"):
        parts = []
        for s in strategies:
            leaves = ctx.value("partition_strategy", s, f"{what} when C0 leaves")
            returns = ctx.value("partition_strategy", s, f"{what} when C0 returns")
            if leaves is not None and returns is not None:
                parts.append(f"{s} {fmt(leaves, '')} / {fmt(returns, '')}")
        if parts:
            sentences.append(f"{what} when C0 leaves / returns: {_join(parts)}")
    cpu = [r.value for r in rows if r.metric.startswith("CPU") and _finite(r.value)]
    if cpu:
        sentences.append(f"consumer CPU {fmt(min(cpu), '')}–{fmt(max(cpu), '% of a core')}")
    if sentences:
        out += ["", _sentence("; ".join(sentences))]
    return [*out, "", *table(rows, transpose=True)]


# The nightly load's runs: a title and what ends the systems of its rows (bench.bench_load's
# CLUSTER for the standalone cluster; local mode's systems have no suffix).
LOAD_RUNS = (("`local[2]`", ""), ("standalone, 2 workers", " on standalone-2-workers"))


def _load_run(r: Result) -> tuple[str, str]:
    """(the run's title, the row's system without the run's suffix) of a nightly-load row."""
    for title, suffix in LOAD_RUNS[::-1]:  # the empty suffix last: it matches every system
        if r.system.endswith(suffix):
            return title, r.system.removesuffix(suffix)
    raise AssertionError("unreachable: the last suffix is empty")


def load_section(ctx: Context) -> list[str]:
    """The load against Spark's own write of the same rows, in each run (local mode, the
    standalone cluster) side by side; then the profile's top lines, when a run has them."""
    rows = ctx.rows["nightly_load"]
    out = ["**The nightly load**, Camus-style: one Spark task per split fetches its range and "
           "writes its Parquet files (by topic and date) with pyarrow in the Python worker; the "
           "driver checks the tasks' results against the plan and publishes with one atomic "
           "rename. Against it: the same Spark session writing rows of the same columns and "
           "bytes (200 incompressible bytes per value) generated in the JVM (`spark.range`: no "
           "source, nothing crossing from Python), with both tables' Parquet bytes. Run in "
           "`local[2]` and on a standalone cluster of two 1-core workers (master, workers and "
           "executors JVMs of their own, the driver a process of its own): two task slots "
           "either way. Phases: plan reads the last manifest and the log ends; read+write is "
           "the job of split tasks — their own fetch and write time, summed over the splits, "
           "is divided by the two slots; the rest is Spark scheduling them and starting their "
           "Python workers; verify checks the task results against the plan and the staged "
           "files; commit writes the manifest and renames."]  # fmt: skip
    titles: list[str] = []
    cells: dict[tuple[str, str], dict[str, str]] = {}
    profiles: dict[str, list[Result]] = {}
    for r in rows:
        title, system = _load_run(r)
        if system == "profile":
            profiles.setdefault(title, []).append(r)
            continue
        if title not in titles:
            titles.append(title)
        cells.setdefault((system, r.metric), {})[title] = fmt_row(r)
    for title, suffix in LOAD_RUNS:
        load = next((r for r in rows if r.system == f"sluice{suffix}" and r.unit == "rows/s"),
                    None)  # fmt: skip
        spark = next((r for r in rows if r.system == f"spark in-memory write{suffix}"
                      and r.unit == "rows/s"), None)  # fmt: skip
        ratio = ctx.value("nightly_load", f"sluice/in-memory{suffix}", "rows/s")
        if load is None or spark is None or ratio is None:
            continue
        sentence = (f"{title}: {load.metric} at {fmt(load.value, load.unit)}, "
                    f"{fmt(ratio, 'ratio')} Spark writing the same rows with no source "
                    f"({fmt(spark.value, spark.unit)})")  # fmt: skip
        sizes = [ctx.value("nightly_load", f"{s}{suffix}", "parquet bytes")
                 for s in ("sluice", "spark in-memory write")]  # fmt: skip
        if sizes[0] is not None and sizes[1] is not None:
            sentence += (f"; Parquet {fmt(sizes[0] / 1e6, 'MB')} against "
                         f"{fmt(sizes[1] / 1e6, 'MB')}")  # fmt: skip
        out += ["", sentence + "."]
    lines = ["| system | metric | " + " | ".join(titles) + " |",
             "|---|---|" + "---:|" * len(titles)]  # fmt: skip
    lines += [f"| {_cell(system)} | {_cell(metric)} | "
              + " | ".join(_cell(by_run.get(t, "")) for t in titles) + " |"
              for (system, metric), by_run in cells.items()]  # fmt: skip
    out += ["", *lines]
    for title, found in profiles.items():
        out += ["", f"Where the load's Python workers spend their time ({title}; py-spy, "
                "`SLUICE_BENCH_PROFILE=1`: each line's own samples, % of the workers'):",
                "", "```", *(f"{r.value:5.1f}%  {r.metric}" for r in found), "```"]  # fmt: skip
    return out


# (experiment, transposed, the table's corner: what each figure is) of the cluster section
CLUSTER_TABLES = (
    ("cluster_latency", False, "one 100 B message at a time"),
    ("cluster_throughput", True, "msg/s by batching"),
    ("cluster_partitions", True, "one acks=all message to every partition"),
    ("cluster_failover", False, "kill -9 of the controller"),
    ("cluster_transactions", True, "one transactional producer"),
    ("cluster_rebalance", False, "a third consumer joins"),
)


def cluster_section(ctx: Context) -> list[str]:
    """The replicated cluster (``bench.bench_cluster``): one table per measurement, a
    measurement that hit its time limit shown as "did not finish" (its note says how far)."""
    count = SETUP["cluster_latency"][ctx.mode("cluster_latency")]
    sizes = SETUP["cluster_partitions"][ctx.mode("cluster_partitions")]
    out = ["**Replicated cluster (acks=all)** (`python -m bench.run --only cluster`; `--full` "
           "for more partitions): what users run — three broker processes and a ZooKeeper, "
           "replication factor 3, `min.insync.replicas=2`, confluent-kafka from outside, 100 B "
           f"messages. Latency: {count} messages, each sent after the last was acknowledged. "
           "Throughput: `acks=all` and `acks=1` in one run, the peers' ways of batching. "
           f"Partitions ({sizes}): a round of one message per partition until all are "
           "acknowledged (the first apart), and the topic's creation until every partition is "
           "led and in sync everywhere. Failover: from the controller's SIGKILL until every "
           "partition acknowledged an `acks=all` write sent after it (the ZooKeeper session "
           "timeout in the notes). Transactions: 10-message batches, each flushed, committed "
           "every 1 or 100 batches; one-message transactions. Rebalance: two range consumers of "
           "six partitions settled, a third subscribes; until all three hold a new "
           "assignment."]  # fmt: skip

    def label(r: Result) -> tuple[str, str]:
        return r.metric, "" if _finite(r.value) else "did not finish"

    for experiment, transpose, corner in CLUSTER_TABLES:
        if ctx.rows.get(experiment):
            out += ["", *table(ctx.rows[experiment], transpose=transpose, label=label,
                               corner=corner)]  # fmt: skip
    return out


@dataclass(frozen=True)
class Section:
    experiments: tuple[str, ...]
    render: Callable[[Context], list[str]]
    pngs: tuple[str, ...] = ()
    ratios: bool = True  # quote the ratio rows under the section


SECTIONS = (
    Section(("produce", "consume", "first_message", "storage_overhead"), peers_section,
            ("produce_over_time.png", "consume.png", "storage_overhead.png",
             "first_message.png"), ratios=False),
    Section(("log_append", "log_read"), log_section),
    Section(("log_cleaner",), cleaner_section),
    Section(("iceberg_compaction", "iceberg_commit"), iceberg_section, ratios=False),
    Section(("fetch_path",), fetch_section),
    Section(("transactional_produce",), transactions_section),
    Section(tuple(e for e, _, _ in CLUSTER_TABLES), cluster_section, ratios=False),
    Section(("broker_profile",), profile_section, ratios=False),
    Section(("scale",), scale_section, ("scale.png",), ratios=False),
    Section(("offsets_article",), offsets_section),
    Section(("partition_strategy",), assignors_section, ("assignors.png",)),
    Section(("nightly_load",), load_section, ratios=False),
)  # fmt: skip


def generic_section(experiment: str) -> Section:
    def render(ctx: Context) -> list[str]:
        return [f"**{experiment}**", "", *table(ctx.rows[experiment])]

    return Section((experiment,), render)


# -- the whole section ---------------------------------------------------------------------


def render(ctx: Context) -> str:
    """The markdown between the page's markers."""
    known = {e for s in SECTIONS for e in s.experiments}
    sections = [s for s in SECTIONS if any(e in ctx.rows for e in s.experiments)]
    sections += [generic_section(e) for e in ctx.rows if e not in known]
    out = _header(ctx)
    runs = {_run_key(ctx.provenance[e]) for e in ctx.rows}
    for section in sections:
        present = [e for e in section.experiments if e in ctx.rows]
        out += ["", *section.render(ctx)]
        tail = []
        if section.ratios and (quoted := ratio_rows(r for e in present for r in ctx.rows[e])):
            tail.append(f"Ratios: {_join(quoted)}.")
        notes = ctx.notes(present)
        if notes:
            tail.append("Notes: " + "; ".join(notes) + ".")
        pngs = [p for p in section.pngs if p in ctx.pngs]
        if pngs:
            tail.append("Plots: " + _join([f"`build/bench/{p}`" for p in pngs]) + ".")
        if len(runs) > 1:
            tail.append(f"_From {_describe_run(ctx.provenance[present[0]])}._")
        if tail:
            out += ["", " ".join(tail)]
    return "\n".join(out) + "\n"


def _header(ctx: Context) -> list[str]:
    m = ctx.machine
    machine = (f"{m.get('cpus', '?')} cores, {m.get('memory_gib', '?')} GiB, Python "
               f"{m.get('python', '?')} ({m.get('platform', '?')}), loopback only")  # fmt: skip
    runs: dict[tuple[str, str, str], list[str]] = {}
    for experiment in ctx.rows:
        runs.setdefault(_run_key(ctx.provenance[experiment]), []).append(experiment)
    out = [f"Machine: {machine}. Every comparison is within one run of one experiment (the "
           "machine is noisy; ratios are what to compare). `make bench` runs the quick counts, "
           "`make bench-full` the paper's."]  # fmt: skip
    if len(runs) == 1:
        out[0] += f" Measured with {_describe_run(ctx.provenance[next(iter(ctx.rows))])}."
    else:
        out += ["", "Measured with:"]
        for experiments in runs.values():
            out.append(f"- {_describe_run(ctx.provenance[experiments[0]])}: "
                       f"{_join(experiments)}")  # fmt: skip
    out += ["", "All rows: `build/bench/results.json` (a list of `{experiment, system, metric, "
            "value, unit}`); provenance per experiment: `build/bench/machine.json`. This "
            f"part of the page is generated by `python -m bench.report --write {PAGE}`."
            ]  # fmt: skip
    return out


def _run_key(p: Mapping[str, Any]) -> tuple[str, str, str]:
    return str(p.get("command", "?")), str(p.get("mode", "?")), _day(p.get("date"))


def _describe_run(p: Mapping[str, Any]) -> str:
    command = str(p.get("command", "?"))
    make = MAKE_TARGETS.get(command)
    shown = f"`{make}` (`{command}`)" if make else f"`{command}`"
    return f"{shown}, {p.get('mode', '?')} mode, on {_day(p.get('date'))}"


def _day(date: Any) -> str:
    if not date:
        return "an unrecorded date"
    try:
        return datetime.datetime.fromisoformat(str(date)).date().isoformat()
    except ValueError:
        return str(date)


# -- files ---------------------------------------------------------------------------------


def render_dir(out_dir: Path = OUT_DIR) -> str:
    """``render`` of the files in ``out_dir``."""
    path = out_dir / "results.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no results yet; run `python -m bench.run` first")
    rows = load_results(path)
    machine = _json(out_dir / "machine.json") or {}
    sidecars = {"peers": _json(out_dir / "peers.json"), "profiles": _profiles(out_dir)}
    date = datetime.datetime.fromtimestamp(path.stat().st_mtime).astimezone().isoformat()
    pngs = {p.name for p in out_dir.glob("*.png")}
    return render(context(rows, machine, sidecars, pngs, date))


def _profiles(out_dir: Path) -> dict[str, str]:
    """``profiles/<name>.txt`` by name, in the order ``bench.bench_profile`` runs them."""
    order = {"consume": 0, "fetch": 1, "produce-batch-1": 2}
    paths = sorted((out_dir / "profiles").glob("*.txt"),
                   key=lambda p: (order.get(p.stem.split("-uvloop")[0], 9), p.stem))  # fmt: skip
    return {p.stem: p.read_text() for p in paths}


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def replace_between_markers(text: str, section: str) -> str:
    """``text`` with everything between ``BEGIN`` and ``END`` replaced by ``section``."""
    begins, ends = text.count(BEGIN), text.count(END)
    if begins != 1 or ends != 1:
        raise MarkersError(
            f"expected {BEGIN} and {END} once each, found {begins} and {ends}; add them "
            "around the generated part of the performance section"
        )
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    if end < start:
        raise MarkersError(f"{END} comes before {BEGIN}")
    newline = "\r\n" if "\r\n" in text else "\n"
    body = section.strip("\n").replace("\n", newline)
    return f"{text[:start]}{newline}{newline}{body}{newline}{newline}{text[end:]}"


def write_page(page: Path, section: str) -> bool:
    """Replace the marked part of ``page``; True when that changed the file."""
    with open(page, encoding="utf-8", newline="") as f:
        text = f.read()
    updated = replace_between_markers(text, section)
    if updated == text:
        return False
    with open(page, "w", encoding="utf-8", newline="") as f:
        f.write(updated)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__.split(
        "\n\n")[0])  # fmt: skip
    parser.add_argument("--dir", type=Path, default=OUT_DIR, help="where results.json is")
    parser.add_argument("--write", type=Path, metavar="PAGE",
                        help=f"replace the text between {BEGIN} and {END} of PAGE "
                             f"(the project's is {PAGE})")  # fmt: skip
    args = parser.parse_args(argv)
    try:
        section = render_dir(args.dir)
        if args.write is None:
            print(section, end="")
            return 0
        changed = write_page(args.write, section)
    except (MarkersError, FileNotFoundError) as e:
        print(f"bench.report: {e}", file=sys.stderr)
        return 2
    print(f"{args.write}: {'updated' if changed else 'already up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
