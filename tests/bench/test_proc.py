"""bench.proc against this process and a child of it, and a stat line with an awkward name."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

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


def test_run_in_session_returns_the_exit_status_and_keeps_the_output(tmp_path: Path) -> None:
    log = tmp_path / "child.log"
    status = proc.run_in_session(
        [sys.executable, "-c", "import sys; print('said'); sys.exit(3)"], log, 30.0
    )
    assert status == 3
    assert log.read_text() == "said\n"


def test_run_in_session_ends_a_command_that_overruns_with_what_it_started(
    tmp_path: Path,
) -> None:
    """A command that starts a process of its own (as ``sluice load`` starts Spark's JVM) and
    overruns: None, and nothing of its group is left."""
    pid_file = tmp_path / "grandchild.pid"
    starter = (
        "import subprocess, sys, time\n"
        "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(g.pid))\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    status = proc.run_in_session([sys.executable, "-c", starter], tmp_path / "c.log", 2.0)
    assert status is None
    assert time.monotonic() - started < 30
    grandchild = int(pid_file.read_text())
    try:
        handle = os.pidfd_open(grandchild)
    except ProcessLookupError:
        return  # gone already
    with os.fdopen(handle) as pidfd:  # readable once the process has ended
        ended, _, _ = select.select([pidfd], [], [], 10.0)
    assert ended, f"process {grandchild}, started by the command, still runs"
