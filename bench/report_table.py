"""The tables of the performance page's generated part: number formatting, the ``Context``
the sections draw from (rows, provenance and sidecars by experiment), and the markdown tables
and ratio sentences built from ``Result`` rows (``bench.report`` renders the sections with
them). Functions of values only; no state.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.results import Result, mode_of

__all__ = [
    "Context",
    "Label",
    "context",
    "fmt",
    "fmt_row",
    "pair_ratios",
    "plain_label",
    "ratio_rows",
    "table",
]

# -- formatting ----------------------------------------------------------------------------


def fmt(value: float, unit: str) -> str:
    """``15,356 msg/s``, ``0.46×``, ``1.14 ms``, ``n/a`` for NaN."""
    if not _finite(value):
        return "n/a"
    if unit == "ratio":
        return f"{value:.2f}×"
    if value == int(value):
        text = f"{int(value):,}"
    elif abs(value) >= 100:
        text = f"{value:,.0f}"
    elif abs(value) >= 10:
        text = f"{value:,.1f}"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}" if unit else text


def fmt_row(r: Result) -> str:
    """``fmt`` of the row's value, with ``(min–max)`` of its runs when it was repeated."""
    text = fmt(r.value, r.unit)
    spread = r.spread
    if spread is None or not _finite(spread[0]) or not _finite(spread[2]):
        return text
    if r.unit == "ratio":
        low, high = f"{spread[0]:.2f}", f"{spread[2]:.2f}"
    else:
        low, high = fmt(spread[0], ""), fmt(spread[2], "")
    return f"{text} ({low}–{high})"


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _join(items: Sequence[str]) -> str:
    return ", ".join(items)


# -- the data ------------------------------------------------------------------------------


@dataclass
class Context:
    """What the sections draw from: rows by experiment, provenance by experiment, sidecar
    records (``peers``), and the PNG names present."""

    rows: dict[str, list[Result]]
    machine: Mapping[str, Any]
    provenance: dict[str, dict[str, Any]]
    sidecars: Mapping[str, Any] = field(default_factory=dict)
    pngs: set[str] = field(default_factory=set)

    def value(self, experiment: str, system: str, metric: str) -> float | None:
        for r in self.rows.get(experiment, []):
            if r.system == system and r.metric == metric:
                return r.value
        return None

    def mode(self, experiment: str) -> str:
        return str(self.provenance.get(experiment, {}).get("mode", "quick"))

    def notes(self, experiments: Iterable[str]) -> list[str]:
        return [n for e in experiments for n in self.provenance.get(e, {}).get("notes", [])]


def context(
    rows: Iterable[Result], machine: Mapping[str, Any], sidecars: Mapping[str, Any] | None = None,
    pngs: Iterable[str] = (), results_date: str | None = None,
) -> Context:  # fmt: skip
    """Group ``rows``; experiments without a record in ``machine["experiments"]`` (a
    ``machine.json`` written before records were kept) get its top level, dated
    ``results_date``."""
    by_experiment: dict[str, list[Result]] = {}
    for r in rows:
        by_experiment.setdefault(r.experiment, []).append(r)
    records = machine.get("experiments", {})
    legacy = {k: v for k, v in machine.items() if k != "experiments"}
    legacy.setdefault("date", results_date)
    legacy.setdefault("mode", mode_of(str(legacy.get("command", ""))))
    provenance = {e: dict(records.get(e, legacy)) for e in by_experiment}
    return Context(by_experiment, machine, provenance, dict(sidecars or {}), set(pngs))


# -- tables --------------------------------------------------------------------------------

Label = Callable[[Result], tuple[str, str]]  # a row -> (row label, note after its value)


def plain_label(r: Result) -> tuple[str, str]:
    return r.metric, ""


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


def table(
    rows: Sequence[Result], *, transpose: bool = False, best: str | None = None,
    label: Label = plain_label, extra: Mapping[str, Mapping[str, str]] | None = None,
    corner: str = "",
) -> list[str]:  # fmt: skip
    """Markdown table: systems as rows and metrics as columns, or (``transpose``) metrics as
    rows and systems as columns. ``best`` ("max"/"min") bolds the best value of each metric
    when more than one system has one. ``extra``: more columns, ``{title: {label: text}}``."""
    systems = list(dict.fromkeys(r.system for r in rows))
    labels: list[str] = []
    cells: dict[tuple[str, str], str] = {}
    values: dict[str, list[tuple[float, str]]] = {}
    for r in rows:
        name, note = label(r)
        if name not in labels:
            labels.append(name)
        text = fmt_row(r) if note == "" or _finite(r.value) else note
        if note and _finite(r.value):
            text += f" ({note})"
        cells[name, r.system] = text
        if _finite(r.value) and r.unit != "ratio":
            values.setdefault(name, []).append((r.value, r.system))
    if best is not None:
        for name, found in values.items():
            top = max(v for v, _ in found) if best == "max" else min(v for v, _ in found)
            winners = [s for v, s in found if v == top]
            if len(found) > 1 and len(winners) < len(found):  # ties: every one of them
                for system in winners:
                    cells[name, system] = f"**{cells[name, system]}**"
    extra = extra or {}
    if transpose:
        head = [corner, *systems, *extra]
        body = [
            [name, *(cells.get((name, s), "") for s in systems),
             *(column.get(name, "") for column in extra.values())]
            for name in labels
        ]  # fmt: skip
    else:
        head = [corner, *labels]
        body = [[s, *(cells.get((name, s), "") for name in labels)] for s in systems]
    lines = ["| " + " | ".join(_cell(h) for h in head) + " |",
             "|---|" + "---:|" * (len(head) - 1)]  # fmt: skip
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in body]
    return lines


def ratio_rows(rows: Iterable[Result]) -> list[str]:
    """``system metric: 0.46×`` for every ratio row, as the page's prose quotes them."""
    return [f"{r.system} ({r.metric}) {fmt(r.value, r.unit)}" for r in rows if r.unit == "ratio"]


def pair_ratios(ctx: Context, experiment: str, a: str, b: str, unit: str) -> list[str]:
    """``<metric> <a/b>×`` for every metric in ``unit`` both systems have a value for."""
    out = []
    for r in ctx.rows.get(experiment, []):
        if r.system != a or r.unit != unit:
            continue
        other = ctx.value(experiment, b, r.metric)
        if other and _finite(other) and _finite(r.value):
            name = r.metric.removesuffix(f", {unit}")
            out.append(f"{name} {fmt(r.value / other, 'ratio')}")
    return out
