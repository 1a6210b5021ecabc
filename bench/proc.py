"""CPU time of processes, as Linux's ``/proc`` has it, for the benchmarks that say where CPU went.

``/proc/<pid>/stat`` is one line: ``pid (comm) state ppid …``, with ``utime`` and ``stime`` (the
CPU the process has used in user and kernel mode, in clock ticks, ``SC_CLK_TCK`` a second) as
fields 14 and 15. ``comm`` may itself hold spaces and parentheses, so the fields are split after
the *last* ``)``. A process's figures count all its threads, never its children; a process
that has ended is gone from ``/proc`` with its figures, so a benchmark reads them around a
measurement while the processes it measures live.

Functions only, nothing kept between calls; Linux only (the benchmarks run there). The
machine's load averages (``load_average``) come from ``/proc`` too; ``run_in_session`` runs a
command the benchmarks start (a load's driver, a ``sluice load``) with a bound on its time, in
a session of its own so that the processes it starts (Spark's JVM) end with it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

__all__ = ["Process", "cpu_seconds", "descendants", "load_average", "processes", "run_in_session"]


class Process(NamedTuple):
    """One process of ``processes()``: its parent's pid, its ``comm`` and its CPU seconds."""

    parent: int
    name: str
    cpu: float


def _parse(stat: str) -> Process:
    head, _, rest = stat.rpartition(")")
    fields = rest.split()  # from field 3 (state): ppid is fields[1], utime/stime 11 and 12
    ticks = int(fields[11]) + int(fields[12])
    return Process(int(fields[1]), head.partition("(")[2], ticks / os.sysconf("SC_CLK_TCK"))


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process ``pid`` has used so far (``OSError`` if it is gone)."""
    return _parse(Path(f"/proc/{pid}/stat").read_text()).cpu


def processes() -> dict[int, Process]:
    """Every process alive now, by pid (those that end while listed are left out)."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                table[int(entry)] = _parse(Path(f"/proc/{entry}/stat").read_text())
            except OSError:
                continue
    return table


def descendants(table: dict[int, Process], root: int) -> set[int]:
    """``root`` and every process below it in ``table`` (children, their children, …)."""
    children: dict[int, list[int]] = {}
    for pid, process in table.items():
        children.setdefault(process.parent, []).append(pid)
    found, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def load_average() -> str:
    """The machine's load averages over 1, 5 and 15 minutes (``/proc/loadavg``), as the
    benchmarks note them beside their runs: ``"0.48, 0.95, 1.22"``."""
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


def run_in_session(
    argv: Sequence[str],
    log: Path,
    timeout_s: float,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> int | None:
    """Run ``argv`` in a session of its own, its output and errors into ``log``; wait at most
    ``timeout_s`` seconds. Return its exit status, or ``None`` when it did not finish in time.
    Either way its whole process group is killed after it (what it started and left running,
    a JVM it spawned, goes with it)."""
    with log.open("w") as output:  # the child holds its own copy of the descriptor
        child = subprocess.Popen(
            list(argv), cwd=cwd, env=None if env is None else dict(env),
            stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        return child.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
