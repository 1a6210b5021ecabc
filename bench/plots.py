"""PNG plots of the cross-system experiments, beside ``results.json``, drawn from the
structured records ``bench/bench_peers.py`` writes to ``build/bench/peers.json``:

* ``produce_over_time.png`` — producer throughput (msg/s in each 0.5 s interval) against data
  sent (MB), one panel per written way, one line per system (its first of repeated runs): the
  paper's Figure 4, with its Kafka averages (50 k msg/s at batch 1, 400 k at batch 50) as
  dotted lines.
* ``consume.png`` — consumer msg/s per system and per written way: Figure 5 (Kafka 22 k msg/s).
  Hatched bars hit the read timeout; their height is the rate reached.
* ``storage_overhead.png`` — bytes on disk per message beyond the 200-byte payload (paper:
  Kafka 9 B, ActiveMQ 144 B).
* ``first_message.png`` — milliseconds from subscribing to the first message.

and from ``build/bench/scale.json`` (``bench/bench_scale.py``):

* ``scale.png`` — produce msg/s in each sampled chunk against the log size when it was written,
  with the consume rates of the slices read at the start, middle and end of the log placed at
  their position (warm and cold page cache); below, the time of a lookup by time of the first
  and of a recent message as the log grew, the dirty page cache (write-back pending) and the
  broker's resident memory.

``python -m bench.plots [build/bench]``. Needs matplotlib (``pip install matplotlib``).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from bench.results import OUT_DIR

SYSTEMS = ("sluice", "sluice-uvloop", "tansu", "rabbitmq", "activemq")
COLORS = {"sluice": "#1f77b4", "sluice-uvloop": "#17becf", "tansu": "#ff7f0e",
          "rabbitmq": "#2ca02c", "activemq": "#d62728"}  # fmt: skip
MODES = ("batch 1", "batch 50", "default batching")
PAPER_PRODUCE = {"batch 1": 50_000, "batch 50": 400_000}  # Kafka, Figure 4
PAPER_CONSUME = 22_000  # Kafka, Figure 5
PAPER_STORAGE = {"Kafka": 9, "ActiveMQ": 144}  # bytes per message


def render(out_dir: Path = OUT_DIR) -> list[Path]:
    """Draw every plot the records allow; returns the PNG paths written."""
    peers_path, scale_path = out_dir / "peers.json", out_dir / "scale.json"
    if not peers_path.exists() and not scale_path.exists():
        print(f"plots: neither {peers_path} nor {scale_path}; run the peers or scale benchmark")
        return []
    try:
        import matplotlib

        matplotlib.use("Agg")
    except ImportError:
        print("plots: matplotlib is not installed (pip install matplotlib)")
        return []
    paths = _peers(json.loads(peers_path.read_text()), out_dir) if peers_path.exists() else []
    if scale_path.exists():
        paths.append(_scale(json.loads(scale_path.read_text()), out_dir))
    return [p for p in paths if p is not None]


def _peers(records: dict[str, Any], out_dir: Path) -> list[Path | None]:
    note = _note(records, out_dir)
    paths = [
        _produce(records, out_dir, note),
        _bars(records["consume"], "rate", "msg/s", "Consumer throughput (Figure 5)",
              out_dir / "consume.png", note, {"paper: Kafka 22 k msg/s": PAPER_CONSUME},
              timed_out=lambda r: not r["complete"]),
        _bars(records["storage"], "bytes_per_message", "bytes per message beyond payload",
              "Storage overhead per 200-byte message", out_dir / "storage_overhead.png", note,
              {f"paper: {k} {v} B": v for k, v in PAPER_STORAGE.items()}),
        _first(records, out_dir, note),
    ]  # fmt: skip
    return paths


def _note(records: dict[str, Any], out_dir: Path) -> str:
    kind = "quick (small counts)" if records.get("quick") else "full"
    cpus = ""
    machine = out_dir / "machine.json"
    if machine.exists():
        cpus = f", {json.loads(machine.read_text()).get('cpus')} CPUs"
    return f"{kind} run, loopback{cpus}; one producer, one consumer, 200-byte messages"


def _produce(records: dict[str, Any], out_dir: Path, note: str) -> Path | None:
    import matplotlib.pyplot as plt

    # One line per system and way: the first of repeated runs (the bars give the median).
    runs = [r for r in records["produce"] if r.get("repeat", 0) == 0]
    modes = [m for m in MODES if any(r["mode"] == m for r in runs)]
    if not modes:
        return None
    fig, axes = plt.subplots(
        1, len(modes), figsize=(5.2 * len(modes), 4.4), squeeze=False, sharey=True
    )
    for ax, mode in zip(axes[0], modes, strict=True):
        for run in (r for r in runs if r["mode"] == mode):
            xs, ys = _rates(run["samples"], records.get("message_bytes", 200))
            average = run["count"] / run["seconds"]
            label = f"{run['system']} (avg {average:,.0f})"
            color = COLORS.get(run["system"])
            if sum(1 for y in ys if _finite(y)) > 1:
                ax.plot(xs, ys, marker=".", label=label, color=color)
            else:  # one interval only: a single point at the average
                mb = run["count"] * records.get("message_bytes", 200) / 1e6
                ax.plot([mb], [average], marker="o", label=label, color=color)
        if mode in PAPER_PRODUCE:
            ax.axhline(PAPER_PRODUCE[mode], ls=":", color="grey")
            ax.annotate(f"paper: Kafka {PAPER_PRODUCE[mode]:,}", (0, PAPER_PRODUCE[mode]),
                        xycoords=("axes fraction", "data"), fontsize=8, color="grey",
                        va="bottom")  # fmt: skip
        ax.set_yscale("log")
        ax.set_title(mode)
        ax.set_xlabel("data sent (MB)")
        ax.set_ylabel("messages/s acknowledged (per 0.5 s)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Producer throughput over time (Figure 4)\n{note}", fontsize=10)
    fig.tight_layout()
    path = out_dir / "produce_over_time.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _rates(samples: list[list[float]], message: int) -> tuple[list[float], list[float]]:
    """(MB acknowledged at the end of each interval, msg/s within it; NaN for none)."""
    xs, ys = [], []
    for (t0, c0), (t1, c1) in zip(samples, samples[1:], strict=False):
        if t1 > t0 and c1 >= c0:
            xs.append(c1 * message / 1e6)
            # An interval with nothing acknowledged is a gap on the log scale.
            ys.append((c1 - c0) / (t1 - t0) if c1 > c0 else math.nan)
    return xs, ys


def _bars(
    rows: list[dict[str, Any]], key: str, ylabel: str, title: str, path: Path, note: str,
    references: dict[str, float], timed_out: Any = None,
) -> Path | None:  # fmt: skip
    import matplotlib.pyplot as plt

    if not rows:
        return None
    systems = [s for s in SYSTEMS if any(r["system"] == s for r in rows)]
    modes = [m for m in MODES if any(r["mode"] == m for r in rows)]
    width = 0.8 / len(modes)
    fig, ax = plt.subplots(figsize=(8, 4.6))
    top = max([r[key] for r in rows if _finite(r[key])] + list(references.values()) + [1])
    for i, mode in enumerate(modes):
        for j, system in enumerate(systems):
            row = next((r for r in rows if r["system"] == system and r["mode"] == mode), None)
            if row is None:
                continue
            x = j + (i - (len(modes) - 1) / 2) * width
            if not _finite(row[key]):
                ax.text(x, top * 0.02, "n/a", ha="center", fontsize=8, rotation=90)
                continue
            hatch = "//" if timed_out is not None and timed_out(row) else None
            ax.bar(x, row[key], width, color=f"C{i}", hatch=hatch, edgecolor="black",
                   label=mode if j == 0 or mode not in ax.get_legend_handles_labels()[1]
                   else None)  # fmt: skip
            ax.text(x, row[key], f"{row[key]:,.0f}", ha="center", va="bottom", fontsize=7)
    for k, (label, value) in enumerate(references.items()):
        ax.axhline(value, ls=":", color="grey")
        ax.annotate(label, (1.0, value), xycoords=("axes fraction", "data"), ha="right",
                    va="bottom" if k % 2 == 0 else "top", fontsize=8, color="grey")  # fmt: skip
    ax.set_xticks(range(len(systems)), systems)
    ax.set_ylabel(ylabel)
    ax.set_title(f"{title}\n{note}", fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    if timed_out is not None and any(timed_out(r) for r in rows):
        from matplotlib.patches import Patch

        unique["hatched: read timed out (rate reached)"] = Patch(
            facecolor="white", edgecolor="black", hatch="//"
        )
    ax.legend(unique.values(), unique.keys(), fontsize=8, title="written as")
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _first(records: dict[str, Any], out_dir: Path, note: str) -> Path | None:
    import matplotlib.pyplot as plt

    rows = [r for r in records["first_message"] if _finite(r["ms"])]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(8.5, 3.8))
    labels = [f"{r['system']}\n{r['how']}" for r in rows]
    ax.bar(range(len(rows)), [r["ms"] for r in rows],
           color=[COLORS.get(r["system"], "grey") for r in rows])  # fmt: skip
    for i, r in enumerate(rows):
        ax.text(i, r["ms"], f"{r['ms']:,.0f} ms", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(rows)), labels, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("ms to first message")
    ax.set_title(f"Time to the first message after subscribing\n{note}", fontsize=10)
    fig.tight_layout()
    path = out_dir / "first_message.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _scale(record: dict[str, Any], out_dir: Path) -> Path | None:
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    samples = record["samples"]
    if len(samples) < 2:
        return None
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8.5, 7.8), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 2]})  # fmt: skip
    xs = [s["log_bytes"] / 1e9 for s in samples[1:]]
    rates = [(b["messages"] - a["messages"]) / (b["seconds"] - a["seconds"])
             if b["seconds"] > a["seconds"] else math.nan
             for a, b in zip(samples, samples[1:], strict=False)]  # fmt: skip
    top.plot(xs, rates, marker=".", color=COLORS["sluice"], label="produce (msg/s in the chunk)")
    total = samples[-1]["log_bytes"]
    per_message = total / max(1, samples[-1]["messages"] + 1)
    markers = {"warm": ("o", "#2ca02c"), "cold": ("s", "#d62728")}
    for cache, (marker, color) in markers.items():
        reads = [r for r in record["reads"] if r["cache"] == cache]
        if reads:
            top.plot([(r["start_offset"] + r["count"] / 2) * per_message / 1e9 for r in reads],
                     [r["rate"] for r in reads], marker, color=color, ls="none",
                     label=f"consume a {record['slice_bytes'] / 1e6:,.0f} MB slice there, "
                     f"{cache} page cache")  # fmt: skip
    top.set_ylim(bottom=0)
    top.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: f"{y:,.0f}"))
    top.set_ylabel("messages/s")
    top.grid(alpha=0.3)
    top.legend(fontsize=8, loc="best")
    for key, label in (("lookup_first_ms", "lookup by time: first message"),
                       ("lookup_recent_ms", "lookup by time: a recent message")):  # fmt: skip
        # From the first sample on: at the start the log holds only the warm-up message.
        bottom.plot([s["log_bytes"] / 1e9 for s in samples[1:]], [s[key] for s in samples[1:]],
                    marker=".", label=label)  # fmt: skip
    bottom.set_ylabel("ms (offsets_for_times)")
    bottom.set_xlabel("log size (GB)")
    bottom.set_ylim(bottom=0)
    bottom.grid(alpha=0.3)
    dirty = bottom.twinx()
    dirty.plot([s["log_bytes"] / 1e9 for s in samples],
               [s["dirty_bytes"] / 1e6 for s in samples], color="black", alpha=0.3, lw=1,
               label="dirty page cache (MB)")  # fmt: skip
    if any(s.get("broker_rss_bytes") for s in samples):
        dirty.plot([s["log_bytes"] / 1e9 for s in samples],
                   [s.get("broker_rss_bytes", 0) / 1e6 for s in samples], color="purple",
                   alpha=0.5, lw=1, ls="--", label="broker resident memory (MB)")  # fmt: skip
    dirty.set_ylabel("MB", fontsize=8)
    dirty.set_ylim(bottom=0)
    handles = [*bottom.get_legend_handles_labels()[0], *dirty.get_legend_handles_labels()[0]]
    bottom.legend(handles, [str(h.get_label()) for h in handles], fontsize=8, ncol=2,
                  loc="upper center", bbox_to_anchor=(0.5, -0.22))  # fmt: skip
    kind = "quick" if record.get("quick") else "full"
    fig.suptitle(f"Throughput as the log grows: one partition, 200-byte messages, librdkafka "
                 f"default batching\n{kind} run, {total / 1e9:.2f} GB in "
                 f"{samples[-1]['segments']} segment(s), loopback", fontsize=10)  # fmt: skip
    fig.tight_layout()
    path = out_dir / "scale.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


if __name__ == "__main__":
    for p in render(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT_DIR):
        print(p)
