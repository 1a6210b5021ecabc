"""Benchmark results: a list of ``{"experiment", "system", "metric", "value", "unit", "runs"}``
in ``build/bench/results.json``, and where each experiment's rows came from in
``build/bench/machine.json``.

A measurement repeated (``REPEATS`` times, interleaved with the systems it is compared with) is
one row: ``value`` is the median and ``runs`` every repetition's value, sorted, so the spread
(min/median/max) is ``runs[0]``/``value``/``runs[-1]``. A row measured once has no ``runs``
in the file (read as an empty tuple).

Runs are partial more often than not (``python -m bench.run --only scale``), so ``save`` merges:
the rows of every experiment this run measured replace that experiment's earlier rows, and the
other experiments' rows are kept. An experiment is replaced whole, never row by row, so its
numbers always come from one run and can be compared with each other.

``machine.json`` keeps the machine of the latest save at the top level (``command``, ``date``,
``python``, ``cpus``, ``platform``, ``memory_gib``) and, under ``experiments``, the same fields
plus ``mode`` (quick or full) and ``notes`` for every experiment in ``results.json``.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

OUT_DIR = Path("build/bench")
REPEATS = 3  # repetitions of each repeated measurement: min/median/max of 3
PROVENANCE = ("command", "date", "mode", "python", "cpus", "platform", "memory_gib")


@dataclass(frozen=True)
class Result:
    experiment: str
    system: str
    metric: str
    value: float
    unit: str
    runs: tuple[float, ...] = ()  # every repetition, sorted; ``value`` is their median

    @property
    def spread(self) -> tuple[float, float, float] | None:
        """(min, median, max) of the repetitions; None when measured once."""
        if len(self.runs) < 2:
            return None
        return self.runs[0], self.value, self.runs[-1]


def median(values: Sequence[float]) -> float:
    """The median of the finite ``values`` (NaN when there are none)."""
    finite = [v for v in values if math.isfinite(v)]
    return statistics.median(finite) if finite else math.nan


class Results:
    """The rows (and notes) one run measured. Not thread-safe."""

    def __init__(self) -> None:
        self.items: list[Result] = []
        self.notes: dict[str, list[str]] = {}

    def add(
        self, experiment: str, system: str, metric: str, value: float, unit: str,
        runs: Sequence[float] = (),
    ) -> None:  # fmt: skip
        """One row; ``runs``: the repetitions ``value`` is the median of (see the module)."""
        kept = tuple(sorted(round(v, 3) for v in runs))
        self.items.append(Result(experiment, system, metric, round(value, 3), unit, kept))
        spread = f"  [{kept[0]:,.1f} .. {kept[-1]:,.1f}]" if len(kept) > 1 else ""
        print(f"  {experiment:<22} {system:<22} {metric:<28} {value:>14,.1f} {unit}{spread}",
              flush=True)  # fmt: skip

    def add_runs(
        self, experiment: str, system: str, metric: str, runs: Sequence[float], unit: str
    ) -> None:
        """One row for repeated measurements: their median, with every run kept."""
        self.add(experiment, system, metric, median(runs), unit, runs)

    def note(self, experiment: str, text: str) -> None:
        """A remark the report prints under the experiment's table (how it was measured)."""
        self.notes.setdefault(experiment, []).append(text)
        print(f"  {experiment:<22} note: {text}", flush=True)

    @property
    def experiments(self) -> list[str]:
        """The experiments with rows in this run, in first-seen order."""
        return list(dict.fromkeys(r.experiment for r in self.items))

    def save(self, command: str, mode: str | None = None, out_dir: Path = OUT_DIR) -> Path:
        """Merge this run into ``out_dir/results.json`` and ``machine.json``; returns the
        results path. ``mode`` is "quick" or "full" (guessed from ``command`` when None)."""
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / "results.json"
        machine_path = out_dir / "machine.json"
        old_rows = load_results(path)
        old_machine = _load_json(machine_path)
        old_date = _mtime_date(path)
        path.write_text(json.dumps([row(r) for r in merge(old_rows, self.items)], indent=1))
        info = merge_machine(old_machine, old_date, machine(command, mode), self.experiments,
                             self.notes, {r.experiment for r in old_rows})  # fmt: skip
        machine_path.write_text(json.dumps(info, indent=1))
        return path


def row(r: Result) -> dict[str, Any]:
    """``r`` as a JSON object; ``runs`` only when it was repeated (rows measured once keep the
    five fields files have always had)."""
    out = asdict(r)
    if not r.runs:
        del out["runs"]
    else:
        out["runs"] = list(r.runs)
    return out


def merge(old: Iterable[Result], new: Iterable[Result]) -> list[Result]:
    """``old`` with every experiment that has rows in ``new`` replaced by those rows, in place
    of its first old row; experiments new to the file go at the end."""
    fresh: dict[str, list[Result]] = {}
    for r in new:
        fresh.setdefault(r.experiment, []).append(r)
    out: list[Result] = []
    placed: set[str] = set()
    for r in old:
        if r.experiment not in fresh:
            out.append(r)
        elif r.experiment not in placed:
            out.extend(fresh[r.experiment])
            placed.add(r.experiment)
    for experiment, rows in fresh.items():
        if experiment not in placed:
            out.extend(rows)
    return out


def merge_machine(
    old: Mapping[str, Any], old_date: str | None, current: Mapping[str, Any],
    experiments: Iterable[str], notes: Mapping[str, list[str]], kept: Iterable[str],
) -> dict[str, Any]:  # fmt: skip
    """The new ``machine.json``: ``current`` at the top level; ``experiments`` from ``old``,
    with each experiment run now set to ``current`` (and its ``notes``). ``kept`` experiments
    without a record (a ``machine.json`` from before records were kept) get the old top level
    and ``old_date`` (when the old results were written)."""
    records: dict[str, Any] = dict(old.get("experiments", {}))
    legacy = {k: old[k] for k in PROVENANCE if k in old}
    if legacy:
        legacy.setdefault("date", old_date)
        legacy.setdefault("mode", mode_of(str(legacy.get("command", ""))))
    for experiment in kept:
        if experiment not in records and legacy:
            records[experiment] = dict(legacy)
    for experiment in experiments:
        record = dict(current)
        if notes.get(experiment):
            record["notes"] = list(notes[experiment])
        records[experiment] = record
    return {**current, "experiments": records}


def machine(command: str, mode: str | None = None) -> dict[str, Any]:
    """This machine and run: the provenance fields of ``machine.json``."""
    return {
        "command": command,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "mode": mode or mode_of(command),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30),
    }


def mode_of(command: str) -> str:
    return "full" if "--full" in command or "bench-full" in command else "quick"


def load_results(path: Path) -> list[Result]:
    """The rows in ``path``; none when it is missing. A file that does not parse is moved to
    ``<name>.corrupt`` (with a message) rather than lost or allowed to block the save."""
    if not path.exists():
        return []
    try:
        return [Result(**{**row, "runs": tuple(row.get("runs") or ())})
                for row in json.loads(path.read_text())]  # fmt: skip
    except (ValueError, TypeError) as e:
        aside = path.with_name(path.name + ".corrupt")
        path.replace(aside)
        print(f"results: {path} is not a list of results ({e}); moved to {aside}", flush=True)
        return []


def _load_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _mtime_date(path: Path) -> str | None:
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return None
    return datetime.datetime.fromtimestamp(mtime).astimezone().isoformat(timespec="seconds")


def markdown(results: list[Result]) -> str:
    """All rows as one flat table (``bench.report`` writes the tables of docs/performance.md)."""
    lines = ["| experiment | system | metric | value | unit | min .. max |",
             "|---|---|---|---:|---|---|"]  # fmt: skip
    for r in results:
        value = f"{r.value:,.1f}" if math.isfinite(r.value) else "n/a"
        spread = f"{r.spread[0]:,.1f} .. {r.spread[2]:,.1f}" if r.spread else ""
        lines.append(
            f"| {r.experiment} | {r.system} | {r.metric} | {value} | {r.unit} | {spread} |"
        )
    return "\n".join(lines)
