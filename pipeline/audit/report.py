"""The audit's verdict: per-tier counts compared with the producers', and the report files.

Pure Python (no Spark): :func:`compare` takes the counts ``sluice.pipeline.audit.counts``
gathered and judges each ``(topic, window)``; :func:`write_report` writes ``audit.json``,
``audit.txt`` and ``audit.png`` into the report directory (a local path or any ``pyarrow.fs``
URI). matplotlib is imported only by :func:`render_png`. The counts and results are values
(``AuditResult`` is filled by :func:`compare` and not changed after); every function is
thread-safe, but two :func:`write_report` calls into one directory overwrite each other.

The rules
=========
For every topic and window seen at any tier, and every tier:

* ``count`` — messages carrying the audit server header; ``distinct`` — distinct origins
  (``sluice.pipeline.lineage``: the lineage header, else the record's own position);
  ``duplicates = count - distinct``; ``expected`` — the producers' count;
  ``missing = max(expected - distinct, 0)``; ``extra = max(distinct - expected, 0)``.
  Duplicates are what an at-least-once mirror may add: never a loss.
* A window is **closed** when ``window_end + grace <= cutoff``. A tier judges a closed window
  only when it also has ``window_end + grace <= coverage`` — its own cutoff: the audit's for
  the Kafka tiers, the start of the newest published load for the warehouse (it holds nothing
  newer). A tier's ``state`` is ``open`` (not judged), ``ok``, ``missing`` or ``extra``.
* A window's ``verdict``: ``differs`` when a judged tier is missing or extra, else ``open``
  when some tier did not judge it (or it is not closed), else ``ok``.
* Exit status 1 when any window differs, else 0.

``audit.json`` (version 1)::

    {"version": 1, "verdict": "ok" | "differs", "exit_status": 0 | 1,
     "cutoff": "2026-11-22T03:00:00Z", "window_ms": 60000, "grace_ms": 60000,
     "tiers": ["producers", "live", "offline", "warehouse"],
     "coverage": {"live": "...Z", "offline": "...Z", "warehouse": "...Z" | null},
     "sources": {...}, "summary": {"windows": 12, "closed": 10, "open": 2, "differing": 1},
     "windows": [{"topic": "page_view", "window_start": "2026-11-22T02:31:00Z",
                  "window_start_ms": ..., "window_end_ms": ..., "closed": true,
                  "verdict": "differs", "reporting_producers": 3,
                  "tiers": {"producers": {"count": 100, "distinct": 100, "duplicates": 0,
                                          "expected": 100, "missing": 0, "extra": 0,
                                          "state": "ok"},
                            "warehouse": {"count": 99, ..., "missing": 1, "state": "missing"}}}],
     "mismatches": [{"topic": "page_view", "window_start": "2026-11-22T02:31:00Z",
                     "tier": "warehouse", "kind": "missing", "amount": 1}]}

``audit.txt`` is what the audit prints: a header, one line per topic, then one line per
mismatch in the form ``page_view 2026-11-22T02:31:00Z warehouse missing 1``, then the verdict.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sluice.common.text_table import render_table
from sluice.pipeline.table.filesystem import TableFileSystem

__all__ = [
    "PRODUCERS",
    "REPORT_VERSION",
    "AuditResult",
    "Mismatch",
    "ProducerCount",
    "TierCount",
    "TierResult",
    "WindowResult",
    "compare",
    "format_ms",
    "render_png",
    "render_text",
    "write_report",
]

REPORT_VERSION = 1
PRODUCERS = "producers"
MAX_PLOTTED_TOPICS = 6

Key = tuple[str, int]  # (topic, window index)


def format_ms(ms: int) -> str:
    """``2026-11-22T02:31:00Z`` (milliseconds shown only when not zero)."""
    moment = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{ms % 1000:03d}Z" if ms % 1000 else "Z")


@dataclass(frozen=True, slots=True)
class TierCount:
    """What one tier holds for one ``(topic, window)``."""

    count: int
    distinct: int

    @property
    def duplicates(self) -> int:
        return self.count - self.distinct


@dataclass(frozen=True, slots=True)
class ProducerCount:
    """The sum of the producers' reports for one ``(topic, window)``."""

    count: int
    producers: int  # how many distinct producers reported


@dataclass(frozen=True, slots=True)
class TierResult:
    tier: str
    count: int
    distinct: int
    expected: int
    state: str  # "ok", "missing", "extra" or "open"

    @property
    def duplicates(self) -> int:
        return self.count - self.distinct

    @property
    def missing(self) -> int:
        return max(self.expected - self.distinct, 0)

    @property
    def extra(self) -> int:
        return max(self.distinct - self.expected, 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "distinct": self.distinct,
            "duplicates": self.duplicates,
            "expected": self.expected,
            "missing": self.missing,
            "extra": self.extra,
            "state": self.state,
        }


@dataclass(frozen=True, slots=True)
class Mismatch:
    topic: str
    window_start_ms: int
    tier: str
    kind: str  # "missing" or "extra"
    amount: int

    def line(self) -> str:
        """``page_view 2026-11-22T02:31:00Z warehouse missing 1``."""
        return (
            f"{self.topic} {format_ms(self.window_start_ms)} {self.tier} {self.kind} {self.amount}"
        )


@dataclass(frozen=True, slots=True)
class WindowResult:
    topic: str
    window_start_ms: int
    window_end_ms: int
    closed: bool
    reporters: int  # how many producers reported counts for it (their count: tiers["producers"])
    tiers: Mapping[str, TierResult]

    @property
    def verdict(self) -> str:
        states = [t.state for t in self.tiers.values()]
        if any(s in ("missing", "extra") for s in states):
            return "differs"
        if not self.closed or "open" in states:
            return "open"
        return "ok"

    def mismatches(self) -> list[Mismatch]:
        found = []
        for t in self.tiers.values():
            if t.state in ("missing", "extra"):
                amount = t.missing if t.state == "missing" else t.extra
                found.append(Mismatch(self.topic, self.window_start_ms, t.tier, t.state, amount))
        return found

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "window_start": format_ms(self.window_start_ms),
            "window_start_ms": self.window_start_ms,
            "window_end_ms": self.window_end_ms,
            "closed": self.closed,
            "verdict": self.verdict,
            "reporting_producers": self.reporters,
            "tiers": {name: t.to_json() for name, t in self.tiers.items()},
        }


@dataclass(slots=True)
class AuditResult:
    """The judged windows, with what the report needs to say how they were judged."""

    cutoff_ms: int
    window_ms: int
    grace_ms: int
    tiers: list[str]  # PRODUCERS first, then the counted tiers in data-path order
    coverage: dict[str, int | None]  # each counted tier's own cutoff (ms), None: nothing
    windows: list[WindowResult]
    sources: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def differing(self) -> list[WindowResult]:
        return [w for w in self.windows if w.verdict == "differs"]

    @property
    def mismatches(self) -> list[Mismatch]:
        return [m for w in self.windows for m in w.mismatches()]

    @property
    def verdict(self) -> str:
        return "differs" if self.differing else "ok"

    @property
    def exit_status(self) -> int:
        return 1 if self.differing else 0

    def window(self, topic: str, start_ms: int) -> WindowResult:
        """The result of one window (``KeyError`` if the audit saw no such window)."""
        for w in self.windows:
            if w.topic == topic and w.window_start_ms == start_ms:
                return w
        raise KeyError(f"expected a window {topic} {format_ms(start_ms)}, found none")

    def to_json(self) -> dict[str, Any]:
        closed = sum(1 for w in self.windows if w.closed)
        return {
            "version": REPORT_VERSION,
            "verdict": self.verdict,
            "exit_status": self.exit_status,
            "cutoff": format_ms(self.cutoff_ms),
            "cutoff_ms": self.cutoff_ms,
            "window_ms": self.window_ms,
            "grace_ms": self.grace_ms,
            "tiers": list(self.tiers),
            "coverage": {t: None if c is None else format_ms(c) for t, c in self.coverage.items()},
            "sources": self.sources,
            "notes": list(self.notes),
            "summary": {
                "windows": len(self.windows),
                "closed": closed,
                "open": len(self.windows) - closed,
                "differing": len(self.differing),
            },
            "windows": [w.to_json() for w in self.windows],
            "mismatches": [
                {
                    "topic": m.topic,
                    "window_start": format_ms(m.window_start_ms),
                    "tier": m.tier,
                    "kind": m.kind,
                    "amount": m.amount,
                }
                for m in self.mismatches
            ],
        }


def _state(expected: int, distinct: int, judged: bool) -> str:
    if not judged:
        return "open"
    if distinct < expected:
        return "missing"
    if distinct > expected:
        return "extra"
    return "ok"


def compare(
    producers: Mapping[Key, ProducerCount],
    tiers: Mapping[str, Mapping[Key, TierCount]],
    *,
    window_ms: int,
    grace_ms: int,
    cutoff_ms: int,
    coverage: Mapping[str, int | None] | None = None,
    sources: Mapping[str, Any] | None = None,
    notes: Iterable[str] = (),
) -> AuditResult:
    """Judge every ``(topic, window)`` any tier saw; see the module doc for the rules.

    ``tiers`` maps each counted tier (in data-path order) to its counts; ``coverage`` gives a
    tier's own cutoff when it is earlier than ``cutoff_ms`` (``None``: it covers nothing yet).
    """
    cover: dict[str, int | None] = {name: cutoff_ms for name in tiers}
    for name, value in (coverage or {}).items():
        cover[name] = None if value is None else min(value, cutoff_ms)
    keys = set(producers)
    for counts in tiers.values():
        keys.update(counts)
    windows = []
    for topic, window in sorted(keys):
        start, end = window * window_ms, (window + 1) * window_ms
        closed = end + grace_ms <= cutoff_ms
        made = producers.get((topic, window), ProducerCount(0, 0))
        results = {PRODUCERS: TierResult(PRODUCERS, made.count, made.count, made.count, "ok")}
        if not closed:
            results[PRODUCERS] = TierResult(PRODUCERS, made.count, made.count, made.count, "open")
        for name, counts in tiers.items():
            got = counts.get((topic, window), TierCount(0, 0))
            limit = cover[name]
            judged = closed and limit is not None and end + grace_ms <= limit
            state = _state(made.count, got.distinct, judged)
            results[name] = TierResult(name, got.count, got.distinct, made.count, state)
        windows.append(WindowResult(topic, start, end, closed, made.producers, results))
    return AuditResult(
        cutoff_ms=cutoff_ms,
        window_ms=window_ms,
        grace_ms=grace_ms,
        tiers=[PRODUCERS, *tiers],
        coverage=dict(cover),
        windows=windows,
        sources=dict(sources or {}),
        notes=list(notes),
    )


# -- rendering ------------------------------------------------------------------------------


def _seconds(ms: int) -> str:
    return f"{ms / 1000:g}s"


def render_text(result: AuditResult) -> str:
    """The short report printed to stdout and saved as ``audit.txt``."""
    counted = result.tiers[1:]
    cover = ", ".join(
        f"{t} through {'nothing yet' if c is None else format_ms(c)}"
        for t, c in result.coverage.items()
        if c != result.cutoff_ms
    )
    lines = [
        f"audit at cutoff {format_ms(result.cutoff_ms)}: windows of {_seconds(result.window_ms)}, "
        f"grace {_seconds(result.grace_ms)}; tiers {', '.join(result.tiers)}"
        + (f" ({cover})" if cover else "")
    ]
    lines += result.notes
    by_topic: dict[str, list[WindowResult]] = {}
    for w in result.windows:
        by_topic.setdefault(w.topic, []).append(w)
    if by_topic:
        header = ["topic", "windows", "closed", "differ", PRODUCERS]
        for tier in counted:
            header += [tier, f"{tier} dups"]
        rows = []
        for topic, windows in sorted(by_topic.items()):
            row = [
                topic,
                str(len(windows)),
                str(sum(1 for w in windows if w.closed)),
                str(sum(1 for w in windows if w.verdict == "differs")),
                str(sum(w.tiers[PRODUCERS].count for w in windows)),
            ]
            for tier in counted:
                row.append(str(sum(w.tiers[tier].distinct for w in windows)))
                row.append(str(sum(w.tiers[tier].duplicates for w in windows)))
            rows.append(row)
        lines.append(render_table(header, rows))
        lines.append("(per tier: distinct messages in all windows; dups: copies beyond those)")
    else:
        lines.append("no audited messages and no producer reports")
    mismatches = result.mismatches
    if mismatches:
        lines.append("mismatches (topic, window start, tier, kind, messages):")
        lines += [f"  {m.line()}" for m in mismatches]
    open_windows = sum(1 for w in result.windows if w.verdict == "open")
    lines.append(
        f"verdict: {result.verdict.upper()}: {len(result.differing)} of "
        f"{sum(1 for w in result.windows if w.closed)} closed windows differ; "
        f"{open_windows} windows open (not judged); exit status {result.exit_status}"
    )
    return "\n".join(lines)


def render_png(result: AuditResult) -> bytes:
    """A PNG: per topic (the busiest few), the distinct count of each tier per window.

    Bars when there are few windows, lines otherwise; a red cross marks a tier that differs,
    a grey band the windows not yet closed. Uses matplotlib's Agg canvas directly (no
    ``pyplot`` state, no display needed).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    by_topic: dict[str, list[WindowResult]] = {}
    for w in result.windows:
        by_topic.setdefault(w.topic, []).append(w)
    ranked = sorted(
        by_topic, key=lambda t: (-sum(w.tiers[PRODUCERS].count for w in by_topic[t]), t)
    )
    shown = ranked[:MAX_PLOTTED_TOPICS]
    rows = max(len(shown), 1)
    figure = Figure(figsize=(10, 2.8 * rows + 0.6), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows, 1, squeeze=False)[:, 0]
    title = f"Sluice audit at {format_ms(result.cutoff_ms)}: {result.verdict}"
    if len(ranked) > len(shown):
        title += f" ({len(shown)} of {len(ranked)} topics shown)"
    figure.suptitle(title)
    if not shown:
        axes[0].text(0.5, 0.5, "nothing to audit", ha="center", va="center")
        axes[0].set_axis_off()
    for ax, topic in zip(axes, shown, strict=False):
        _plot_topic(ax, topic, by_topic[topic], result)
    out = io.BytesIO()
    figure.savefig(out, format="png", dpi=100)
    return out.getvalue()


def _plot_topic(ax: Any, topic: str, windows: Sequence[WindowResult], result: AuditResult) -> None:
    xs = list(range(len(windows)))
    tiers = result.tiers
    bars = len(windows) <= 24
    width = 0.8 / len(tiers)
    for i, tier in enumerate(tiers):
        values = [w.tiers[tier].distinct for w in windows]
        if bars:
            pos = [x - 0.4 + width * (i + 0.5) for x in xs]
            ax.bar(pos, values, width=width, label=tier)
        else:
            pos = list(xs)
            ax.plot(pos, values, marker=".", label=tier, linewidth=2.5 if tier == PRODUCERS else 1)
        bad = [(p, v) for p, v, w in zip(pos, values, windows, strict=True)
               if w.tiers[tier].state in ("missing", "extra")]  # fmt: skip
        if bad:
            ax.scatter([p for p, _ in bad], [v for _, v in bad], marker="x", color="red",
                       s=80, zorder=5, label=None)  # fmt: skip
    for x, w in zip(xs, windows, strict=True):
        if w.verdict == "open":
            ax.axvspan(x - 0.5, x + 0.5, color="grey", alpha=0.15, linewidth=0)
    step = max(len(windows) // 12, 1)
    ax.set_xticks(xs[::step])
    ax.set_xticklabels([format_ms(w.window_start_ms)[11:] for w in windows][::step], fontsize=7)
    ax.set_xlim(-0.6, len(windows) - 0.4)
    day = format_ms(windows[0].window_start_ms)[:10] if windows else ""
    ax.set_title(f"{topic} (window start, UTC, {day}; red x: differs; grey: open)", fontsize=9)
    ax.set_ylabel("distinct messages")
    ax.legend(fontsize=7, loc="upper right")


def write_report(result: AuditResult, report_dir: str) -> dict[str, str]:
    """Write ``audit.json``, ``audit.txt`` and ``audit.png``; return their URIs by name."""
    fs, path = TableFileSystem.from_uri(report_dir)
    fs.mkdirs(path)
    contents = {
        "audit.json": (json.dumps(result.to_json(), indent=2) + "\n").encode("utf-8"),
        "audit.txt": (render_text(result) + "\n").encode("utf-8"),
        "audit.png": render_png(result),
    }
    written = {}
    for name, data in contents.items():
        target = posixpath.join(path, name)
        fs.write_bytes(target, data)
        written[name] = fs.uri(target)
    return written
