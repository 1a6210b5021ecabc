"""bench.report and the merge in bench.results: rows in, markdown out; nothing measured."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench import report
from bench.report import BEGIN, END, MarkersError, context, render, replace_between_markers
from bench.results import Result, Results, load_results, merge, merge_machine

MACHINE = {
    "command": "python -m bench.run --quick", "date": "2026-11-22T10:00:00+00:00",
    "mode": "quick", "python": "3.11.7", "cpus": 2, "platform": "Linux", "memory_gib": 24,
}  # fmt: skip


def rows(*specs: tuple[str, str, str, float, str]) -> list[Result]:
    return [Result(*spec) for spec in specs]


PEERS = rows(
    ("produce", "sluice", "batch 1, msg/s", 15355.63, "msg/s"),
    ("produce", "sluice", "batch 1, MB/s", 3.071, "MB/s"),
    ("produce", "tansu", "batch 1, msg/s", 7697.136, "msg/s"),
    ("produce", "tansu", "batch 1, MB/s", 1.539, "MB/s"),
    ("consume", "sluice", "from batch 1 writes, msg/s", 151777.979, "msg/s"),
    ("consume", "tansu", "from batch 1 writes, msg/s (TIMED OUT: 1,000 of 20,000 in 30s)",
     10914.881, "msg/s"),
    ("storage_overhead", "sluice", "written batch 1, per message", 71.155, "B"),
    ("storage_overhead", "tansu", "batch 1, n/a: memory only", math.nan, "B"),
    ("first_message", "sluice", "after subscribe", 3290.121, "ms"),
    ("first_message", "rabbitmq", "after basic_consume", 23.715, "ms"),
)  # fmt: skip

OTHERS = rows(
    ("log_append", "os.write", "16 KiB batches", 2099.666, "MB/s"),
    ("log_append", "sluice Log.append", "16 KiB batches", 622.356, "MB/s"),
    ("log_append", "sluice/os.write", "16 KiB batches", 0.296, "ratio"),
    ("fetch_path", "raw os.sendfile", "loopback", 3675.332, "MB/s"),
    ("fetch_path", "sluice Fetch v11", "loopback", 1689.286, "MB/s"),
    ("fetch_path", "sluice/raw sendfile", "loopback", 0.46, "ratio"),
    ("scale", "sluice", "produce, first 10 % of the log", 400000.0, "msg/s"),
    ("scale", "sluice", "produce, last 10 % of the log", 380000.0, "msg/s"),
    ("scale", "sluice", "produce, last/first", 0.95, "ratio"),
    ("scale", "sluice", "consume end/start, warm cache", 1.3, "ratio"),
    ("mystery", "a", "speed", 1234567.0, "ops/s"),
)  # fmt: skip


def machine_with(experiments: dict[str, dict[str, object]]) -> dict[str, object]:
    return {**MACHINE, "experiments": experiments}


# -- formatting and tables -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [(15355.63, "msg/s", "15,356 msg/s"), (0.296, "ratio", "0.30×"), (1.141, "ms", "1.14 ms"),
     (59.666, "MB/s", "59.7 MB/s"), (1500.0, "messages", "1,500 messages"),
     (math.nan, "B", "n/a"), (3.0, "", "3")],
)  # fmt: skip
def test_fmt(value: float, unit: str, text: str) -> None:
    assert report.fmt(value, unit) == text


def test_table_systems_by_metrics_with_units_in_cells() -> None:
    lines = report.table(OTHERS[:3])
    assert lines == [
        "|  | 16 KiB batches |",
        "|---|---:|",
        "| os.write | 2,100 MB/s |",
        "| sluice Log.append | 622 MB/s |",
        "| sluice/os.write | 0.30× |",
    ]


def test_table_transposed_bolds_the_best_and_adds_columns() -> None:
    lines = report.table(
        [r for r in PEERS if r.experiment == "produce"], transpose=True, best="max",
        label=report._peer_label("produce"), extra={"paper": {"batch 1": "50,000 msg/s"}},
    )  # fmt: skip
    assert lines[0] == "|  | sluice | tansu | paper |"
    assert lines[2] == "| batch 1 | **15,356 msg/s** | 7,697 msg/s | 50,000 msg/s |"
    assert lines[3] == "| batch 1, MB/s | **3.07 MB/s** | 1.54 MB/s |  |"


# -- the whole section ---------------------------------------------------------------------


def rendered(rows_: list[Result], machine: dict[str, object], **kw: object) -> str:
    return render(context(rows_, machine, **kw))  # type: ignore[arg-type]


def test_render_one_table_per_experiment_every_number_from_the_rows() -> None:
    text = rendered(PEERS + OTHERS, MACHINE, pngs={"scale.png", "consume.png"})
    assert "2 cores, 24 GiB, Python 3.11.7" in text
    assert "`make bench` (`python -m bench.run --quick`), quick mode, on 2026-11-22" in text
    # peers: systems as columns, the paper's figures beside them, Sluice/Tansu quoted
    assert "| batch 1 | **15,356 msg/s** | 7,697 msg/s | 50,000 msg/s |" in text
    assert "| from batch 1 writes | **151,778 msg/s** | 10,915 msg/s (timed out: 1,000 of " in text
    assert "| batch 1 | 71.2 B | memory only |" in text  # one value: nothing to bold
    assert "23.7 ms (after basic_consume)" in text
    assert "Sluice/Tansu: produce batch 1 1.99×" in text
    # the ratios the page quotes
    assert "sluice/os.write (16 KiB batches) 0.30×" in text
    assert "sluice/raw sendfile (loopback) 0.46×" in text
    assert "0.95× (within ±10 %)" in text and "1.30× (outside ±10 %)" in text
    # an experiment the report does not know still gets a table
    assert "**mystery**" in text and "| a | 1,234,567 ops/s |" in text
    # the PNGs that exist, and only those
    assert "`build/bench/scale.png`" in text and "`build/bench/consume.png`" in text
    assert "produce_over_time.png" not in text


def test_render_names_each_run_when_experiments_come_from_several() -> None:
    scale_run = {**MACHINE, "command": "python -m bench.run --quick --only scale",
                 "date": "2026-11-23T09:00:00+00:00",
                 "notes": ["the whole log fits in the page cache"]}  # fmt: skip
    machine = machine_with({"log_append": MACHINE, "scale": scale_run})
    text = rendered(OTHERS[:3] + OTHERS[6:10], machine)
    assert "- `make bench` (`python -m bench.run --quick`), quick mode, on 2026-11-22: " \
        "log_append" in text  # fmt: skip
    assert "- `python -m bench.run --quick --only scale`, quick mode, on 2026-11-23: scale" in text
    assert "Notes: the whole log fits in the page cache." in text
    assert "_From `python -m bench.run --quick --only scale`" in text


def test_render_with_a_machine_json_from_before_provenance() -> None:
    legacy = {"command": "make bench", "python": "3.11.7", "cpus": 2, "platform": "Linux",
              "memory_gib": 24}  # fmt: skip
    text = rendered(OTHERS[:3], legacy, results_date="2026-11-22T02:00:00+00:00")
    assert "Measured with `make bench`, quick mode, on 2026-11-22." in text


def test_render_dir_reads_the_files(tmp_path: Path) -> None:
    results = Results()
    for r in OTHERS[:6]:
        results.add(r.experiment, r.system, r.metric, r.value, r.unit)
    results.save("python -m bench.run --quick", "quick", out_dir=tmp_path)
    (tmp_path / "scale.png").write_bytes(b"")
    text = report.render_dir(tmp_path)
    assert "| sluice Fetch v11 | 1,689 MB/s |" in text


# -- the page's markers --------------------------------------------------------------------


def test_replace_between_markers_touches_nothing_outside() -> None:
    page = f"# Performance\r\n\r\n## Measured\r\n{BEGIN}\r\nold\r\ntext\r\n{END}\r\n## Reading\r\n"
    out = replace_between_markers(page, "new\nsection\n")
    assert out == (f"# Performance\r\n\r\n## Measured\r\n{BEGIN}\r\n\r\nnew\r\nsection\r\n\r\n"
                   f"{END}\r\n## Reading\r\n")  # fmt: skip
    assert replace_between_markers(out, "new\nsection\n") == out


@pytest.mark.parametrize(
    "page",
    ["no markers at all\n", f"{BEGIN}\nonly the start\n", f"{END}\n{BEGIN}\n",
     f"{BEGIN}\n{END}\n{BEGIN}\n{END}\n"],
)  # fmt: skip
def test_missing_or_misplaced_markers_are_an_error(page: str) -> None:
    with pytest.raises(MarkersError):
        replace_between_markers(page, "x")


def test_write_without_markers_leaves_the_page_alone(tmp_path: Path) -> None:
    (tmp_path / "bench").mkdir()
    Results().save("python -m bench.run --quick", out_dir=tmp_path / "bench")
    page = tmp_path / "performance.md"
    page.write_text("# Performance\nhand-written\n")
    code = report.main(["--dir", str(tmp_path / "bench"), "--write", str(page)])
    assert code == 2
    assert page.read_text() == "# Performance\nhand-written\n"


def test_write_with_markers(tmp_path: Path) -> None:
    results = Results()
    results.add("fetch_path", "sluice/raw sendfile", "loopback", 0.46, "ratio")
    results.save("python -m bench.run --quick --only broker", out_dir=tmp_path)
    page = tmp_path / "performance.md"
    page.write_text(f"before\n{BEGIN}\n{END}\nafter\n")
    assert report.main(["--dir", str(tmp_path), "--write", str(page)]) == 0
    text = page.read_text()
    assert text.startswith(f"before\n{BEGIN}\n\n") and text.endswith(f"\n\n{END}\nafter\n")
    assert "| sluice/raw sendfile | 0.46× |" in text
    # the generated part names the command that makes it
    assert "generated by `python -m bench.report --write docs/performance.md`" in text
    assert report.main(["--dir", str(tmp_path), "--write", str(page)]) == 0
    assert page.read_text() == text  # a second write changes nothing


def test_the_projects_page_has_one_generated_part_and_its_reading_below() -> None:
    """docs/performance.md: the markers once each, the generated part saying how it is made,
    and the hand-written reading and the experiments not rerun kept outside it."""
    text = (Path(__file__).resolve().parents[2] / report.PAGE).read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    generated = text[text.index(BEGIN) : text.index(END)]
    after = text[text.index(END) :]
    assert f"`python -m bench.report --write {report.PAGE}`" in generated
    assert "## Reading the runs" in after and "## Experiments not rerun this session" in after
    # in the form --write leaves it: writing the same part again changes nothing
    assert replace_between_markers(text, generated[len(BEGIN) :]) == text


# -- merging partial runs ------------------------------------------------------------------


def test_merge_replaces_rerun_experiments_whole_and_keeps_the_others() -> None:
    old = rows(("log_append", "os.write", "16 KiB", 1.0, "MB/s"),
               ("scale", "sluice", "old metric", 1.0, "msg/s"),
               ("scale", "sluice", "another", 2.0, "msg/s"),
               ("fetch_path", "raw", "loopback", 3.0, "MB/s"))  # fmt: skip
    new = rows(("scale", "sluice", "produce", 9.0, "msg/s"),
               ("peers_new", "x", "y", 4.0, "B"))  # fmt: skip
    assert merge(old, new) == [old[0], new[0], old[3], new[1]]


def test_save_merges_results_and_records_each_experiment(tmp_path: Path) -> None:
    first = Results()
    first.add("log_append", "os.write", "16 KiB batches", 2000.0, "MB/s")
    first.add("scale", "sluice", "produce, whole log", 100.0, "msg/s")
    first.save("python -m bench.run --quick", out_dir=tmp_path)
    second = Results()
    second.add("scale", "sluice", "produce, whole log", 200.0, "msg/s")
    second.note("scale", "fits in the page cache")
    second.save("python -m bench.run --full --only scale", "full", out_dir=tmp_path)

    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved == [
        {"experiment": "log_append", "system": "os.write", "metric": "16 KiB batches",
         "value": 2000.0, "unit": "MB/s"},
        {"experiment": "scale", "system": "sluice", "metric": "produce, whole log",
         "value": 200.0, "unit": "msg/s"},
    ]  # fmt: skip
    machine = json.loads((tmp_path / "machine.json").read_text())
    assert machine["command"] == "python -m bench.run --full --only scale"
    assert machine["experiments"]["log_append"]["command"] == "python -m bench.run --quick"
    assert machine["experiments"]["log_append"]["mode"] == "quick"
    assert machine["experiments"]["scale"]["mode"] == "full"
    assert machine["experiments"]["scale"]["notes"] == ["fits in the page cache"]
    assert "notes" not in machine["experiments"]["log_append"]


def test_merge_machine_adopts_a_legacy_top_level_for_kept_experiments() -> None:
    legacy = {"command": "make bench-full", "python": "3.11.7", "cpus": 2}
    current = {**MACHINE, "command": "python -m bench.run --quick --only scale"}
    out = merge_machine(legacy, "2026-11-20T00:00:00+00:00", current, ["scale"], {},
                        {"log_append"})  # fmt: skip
    assert out["experiments"]["log_append"] == {
        "command": "make bench-full", "python": "3.11.7", "cpus": 2,
        "date": "2026-11-20T00:00:00+00:00", "mode": "full",
    }  # fmt: skip
    assert out["experiments"]["scale"]["command"] == "python -m bench.run --quick --only scale"


def test_a_corrupt_results_file_is_moved_aside_not_lost(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text("{not json")
    assert load_results(path) == []
    assert (tmp_path / "results.json.corrupt").read_text() == "{not json"


def test_best_bolds_every_system_tied_for_it_and_nothing_when_all_tie() -> None:
    tied = rows(("x", "a", "lost", 0.0, "messages"), ("x", "b", "lost", 0.0, "messages"),
                ("x", "c", "lost", 5.0, "messages"), ("x", "a", "dup", 1.0, "messages"),
                ("x", "b", "dup", 1.0, "messages"))  # fmt: skip
    lines = report.table(tied, transpose=True, best="min")
    assert lines[2] == "| lost | **0 messages** | **0 messages** | 5 messages |"
    assert lines[3] == "| dup | 1 messages | 1 messages |  |"


def test_end_to_end_rates_as_fractions_of_the_machine_limits() -> None:
    limits = rows(
        ("log_append", "os.write", "1024 KiB batches", 2000.0, "MB/s"),
        ("fetch_path", "raw os.sendfile", "loopback", 3000.0, "MB/s"),
        ("produce", "sluice", "default batching, MB/s", 80.0, "MB/s"),
        ("consume", "sluice", "from default batching writes, msg/s", 600_000.0, "msg/s"),
    )
    text = rendered(limits, MACHINE, sidecars={"peers": {"message_bytes": 200}})
    assert "moves 80 MB/s of payload, 0.04× the disk's sequential write bandwidth" in text
    assert "consuming that topic moves 120 MB/s, 0.04× a raw loopback `sendfile`" in text
    # without the limits in the same results, no fraction is made up
    assert "End to end" not in rendered(limits[2:], MACHINE)


# -- repeated runs, client settings, profiles ------------------------------------------------


def test_a_repeated_row_shows_its_median_and_spread() -> None:
    results = Results()
    results.add_runs("produce", "sluice", "batch 1, msg/s", [12_000.0, 9_000.0, 15_000.0], "msg/s")
    results.add_runs("fetch_path", "sluice/raw sendfile", "loopback", [0.3, 0.5, 0.4], "ratio")
    produce, ratio = results.items
    assert produce.value == 12_000.0
    assert produce.runs == (9_000.0, 12_000.0, 15_000.0)
    assert produce.spread == (9_000.0, 12_000.0, 15_000.0)
    assert report.fmt_row(produce) == "12,000 msg/s (9,000–15,000)"
    assert report.fmt_row(ratio) == "0.40× (0.30–0.50)"
    assert report.fmt_row(PEERS[0]) == "15,356 msg/s"  # measured once: no spread
    assert "(9,000–15,000)" in "\n".join(report.table([produce]))


def test_runs_survive_a_save_and_rows_measured_once_keep_their_shape(tmp_path: Path) -> None:
    results = Results()
    results.add_runs("consume", "tansu", "from batch 1 writes, msg/s", [3.0, 1.0, 2.0], "msg/s")
    results.add("first_message", "tansu", "after subscribe", 5.0, "ms")
    path = results.save("python -m bench.run --quick --only peers", out_dir=tmp_path)
    raw = json.loads(path.read_text())
    assert raw[0]["runs"] == [1.0, 2.0, 3.0]
    assert "runs" not in raw[1]
    assert load_results(path) == results.items


def test_peer_counts_name_each_count_once_with_the_repetitions_and_client_settings() -> None:
    records = {
        "repeats": 3, "phase_seconds": 3.0, "versions": {"sluice": "this tree"},
        "produce": [{"system": "sluice", "mode": "batch 1", "count": 15_000, "repeat": r}
                    for r in range(3)],
        "client": {"client": "confluent-kafka 2.16.0", "producer": {"acks": 1},
                   "producer_modes": {"batch 1": {"linger.ms": 0}},
                   "consumer": {"fetch.max.bytes": 204800}},
    }  # fmt: skip
    ctx = context(PEERS, MACHINE, {"peers": records})
    text = report._peer_counts(ctx)
    assert text.count("15,000 (batch 1)") == 1
    assert "median of 3 runs" in text and "at least 3 s" in text
    assert "`fetch.max.bytes=204800`" in text and "batch 1: `linger.ms=0`" in text


PROFILE_TEXT = """consume: a read; 100 msg/s under the profiler
40 samples of the broker's busy time
split: read 10%

own time (innermost frame):
   50.0%  Log.read (broker/log/log.py)
   25.0%  Broker._flush (broker/server/broker.py)

total time (anywhere on the stack), below the event loop:
   75.0%  Broker.handle_frame (broker/server/broker.py)
"""


def test_profile_section_has_the_split_and_each_profiles_top_lines() -> None:
    rows_ = rows(("broker_profile", "consume", "read", 10.0, "%"),
                 ("broker_profile", "consume", "handler", 50.0, "%"))  # fmt: skip
    ctx = context(rows_, MACHINE, {"profiles": {"consume": PROFILE_TEXT}})
    text = render(ctx)
    assert "| share of busy samples | consume |" in text
    assert "| handler | 50 % |" in text
    assert "`consume` — consume: a read; 100 msg/s under the profiler" in text
    assert "   50.0%  Log.read (broker/log/log.py)" in text
    assert "   75.0%  Broker.handle_frame (broker/server/broker.py)" in text
    assert report.profile_excerpt(PROFILE_TEXT, lines=1) == [
        "own time (innermost frame):", "   50.0%  Log.read (broker/log/log.py)",
        "total time (anywhere on the stack), below the event loop:",
        "   75.0%  Broker.handle_frame (broker/server/broker.py)",
    ]  # fmt: skip


def test_render_dir_reads_the_profiles(tmp_path: Path) -> None:
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "fetch.txt").write_text("fetch: b\n")
    (tmp_path / "profiles" / "consume.txt").write_text(PROFILE_TEXT)
    assert list(report._profiles(tmp_path)) == ["consume", "fetch"]


LOAD = rows(
    ("nightly_load", "sluice", "1,000,000 rows over 8 partitions", 156799.364, "rows/s"),
    ("nightly_load", "sluice", "phase read+write", 6.133, "s"),
    ("nightly_load", "sluice", "parquet bytes", 204045586, "B"),
    ("nightly_load", "spark in-memory write", "1,000,000 rows", 91452.714, "rows/s"),
    ("nightly_load", "spark in-memory write", "parquet bytes", 214414396, "B"),
    ("nightly_load", "sluice/in-memory", "rows/s", 1.715, "ratio"),
    ("nightly_load", "profile", "read_split (pipeline/source/split_reader.py:309)", 18.6, "%"),
    ("nightly_load", "sluice on standalone-2-workers", "1,000,000 rows over 8 partitions",
     120000.0, "rows/s"),
    ("nightly_load", "sluice on standalone-2-workers", "phase read+write", 8.0, "s"),
    ("nightly_load", "sluice on standalone-2-workers", "parquet bytes", 204000000, "B"),
    ("nightly_load", "spark in-memory write on standalone-2-workers", "1,000,000 rows",
     60000.0, "rows/s"),
    ("nightly_load", "spark in-memory write on standalone-2-workers", "parquet bytes",
     214000000, "B"),
    ("nightly_load", "sluice/in-memory on standalone-2-workers", "rows/s", 0.5, "ratio"),
)  # fmt: skip


def test_load_section_puts_local_mode_and_the_cluster_side_by_side() -> None:
    text = render(context(LOAD, MACHINE))
    assert "Camus-style" in text and "Arrow" not in text
    assert ("`local[2]`: 1,000,000 rows over 8 partitions at 156,799 rows/s, 1.72× Spark writing "
            "the same rows with no source (91,453 rows/s); Parquet 204 MB against 214 MB."
            ) in text  # fmt: skip
    assert ("standalone, 2 workers: 1,000,000 rows over 8 partitions at 120,000 rows/s, 0.50× "
            "Spark writing the same rows with no source (60,000 rows/s); Parquet 204 MB against "
            "214 MB.") in text  # fmt: skip
    assert "| system | metric | `local[2]` | standalone, 2 workers |" in text
    assert "| sluice | phase read+write | 6.13 s | 8 s |" in text
    assert "| sluice/in-memory | rows/s | 1.72× | 0.50× |" in text
    assert "\n 18.6%  read_split (pipeline/source/split_reader.py:309)" in text
    assert "| profile |" not in text


def test_load_section_of_a_local_run_alone() -> None:
    local = [r for r in LOAD if "standalone" not in r.system and r.system != "profile"]
    text = render(context(local, MACHINE))
    assert "| system | metric | `local[2]` |" in text
    assert "standalone, 2 workers:" not in text and "py-spy" not in text


CLUSTER = rows(
    ("cluster_latency", "acks=all", "p50", 1.7, "ms"),
    ("cluster_latency", "acks=all", "p99", 17.3, "ms"),
    ("cluster_latency", "acks=1", "p50", 0.2, "ms"),
    ("cluster_latency", "acks=1", "p99", 0.3, "ms"),
    ("cluster_throughput", "acks=all", "batch 1", 710.5, "msg/s"),
    ("cluster_throughput", "acks=1", "batch 1", 8988.0, "msg/s"),
    ("cluster_throughput", "acks=all/acks=1", "batch 1", 0.079, "ratio"),
    ("cluster_partitions", "300 partitions", "topic creation", 4.2, "s"),
    ("cluster_partitions", "300 partitions", "round, median of the rest", 250.0, "ms"),
    ("cluster_partitions", "4,000 partitions", "topic creation", math.nan, "s"),
    ("cluster_failover", "300 partitions", "until every partition takes acks=all writes", 3.7,
     "s"),
    ("cluster_rebalance", "3 consumers, range", "join to all three assigned", 3.0, "s"),
)  # fmt: skip


def test_cluster_section_says_which_setting_each_figure_is() -> None:
    notes = ["creating wide-4000 (4,000 partitions): did not finish in 600 s",
             "3 broker processes, one ZooKeeper, zookeeper.session.timeout.ms=4000"]  # fmt: skip
    full = {**MACHINE, "command": "python -m bench.run --full --only cluster", "mode": "full"}
    experiments = {r.experiment: full for r in CLUSTER}
    experiments["cluster_partitions"] = {**full, "notes": notes[:1]}
    experiments["cluster_latency"] = {**full, "notes": notes[1:]}
    text = render(context(CLUSTER, machine_with(experiments)))
    section = text[text.index("**Replicated cluster (acks=all)**") :]
    assert "`python -m bench.run --only cluster`" in section
    assert "`min.insync.replicas=2`" in section and "replication factor 3" in section
    assert "10,000 messages" in section and "300, 1,500 and 4,000" in section  # full mode's
    assert "| one 100 B message at a time | p50 | p99 |" in section
    assert "| acks=all | 1.7 ms | 17.3 ms |" in section
    assert "| batch 1 | 710 msg/s | 8,988 msg/s | 0.08× |" in section
    assert "| topic creation | 4.2 s | did not finish |" in section  # NaN: past its limit
    assert "| kill -9 of the controller | until every partition takes acks=all writes |" in section
    assert "| 300 partitions | 3.7 s |" in section
    assert "| 3 consumers, range | 3 s |" in section
    assert "Notes: " + "; ".join(notes[::-1]) + "." in section  # the setting first, once
    assert "Ratios:" not in section  # the ratio is a column of its table already
