"""bench.proc against this process and a child of it, and a stat line with an awkward name."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench import proc


def test_a_stat_line_is_split_after_the_last_parenthesis_of_its_name() -> None:
    ticks = os.sysconf("SC_CLK_TCK")
    line = f"42 (a) b (c) S 7 42 42 0 -1 4194560 1 0 0 0 {3 * ticks} {ticks} 0 0 20 0 1 0\n"
    assert proc._parse(line) == proc.Process(parent=7, name="a) b (c", cpu=4.0)


def test_cpu_seconds_grow_with_the_cpu_this_process_burns() -> None:
    before = proc.cpu_seconds(os.getpid())
    busy = time.process_time() + 0.2
    while time.process_time() < busy:
        pass
    assert proc.cpu_seconds(os.getpid()) - before >= 0.15


def test_processes_and_descendants_find_a_child_and_only_below_the_root() -> None:
    with subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                          stdin=subprocess.PIPE) as child:  # fmt: skip
        table = proc.processes()
        assert table[os.getpid()].parent == os.getppid()
        assert table[child.pid].parent == os.getpid()
        below = proc.descendants(table, os.getpid())
        assert {os.getpid(), child.pid} <= below
        assert os.getppid() not in below
        assert proc.descendants(table, child.pid) == {child.pid}
        child.communicate(timeout=10)
