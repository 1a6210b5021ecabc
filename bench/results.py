"""Benchmark results: a list of ``{"experiment", "system", "metric", "value", "unit"}``
written to ``build/bench/results.json``, and the table printed from it."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict, dataclass
from pathlib import Path

OUT_DIR = Path("build/bench")


@dataclass(frozen=True)
class Result:
    experiment: str
    system: str
    metric: str
    value: float
    unit: str


class Results:
    def __init__(self) -> None:
        self.items: list[Result] = []

    def add(self, experiment: str, system: str, metric: str, value: float, unit: str) -> None:
        self.items.append(Result(experiment, system, metric, round(value, 3), unit))
        print(f"  {experiment:<22} {system:<22} {metric:<28} {value:>14,.1f} {unit}", flush=True)

    def save(self, command: str) -> Path:
        OUT_DIR.mkdir(parents=True, exist_ok=True)
        path = OUT_DIR / "results.json"
        path.write_text(json.dumps([asdict(r) for r in self.items], indent=1))
        (OUT_DIR / "machine.json").write_text(json.dumps(machine(command), indent=1))
        return path


def machine(command: str) -> dict[str, object]:
    return {
        "command": command,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30),
    }


def markdown(results: list[Result]) -> str:
    lines = ["| experiment | system | metric | value | unit |", "|---|---|---|---:|---|"]
    for r in results:
        lines.append(f"| {r.experiment} | {r.system} | {r.metric} | {r.value:,.1f} | {r.unit} |")
    return "\n".join(lines)
