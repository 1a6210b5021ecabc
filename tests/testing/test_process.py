"""``sluice.testing.process.ChildProcess``: start, readiness, stop, kill, always cleaned up."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from sluice.testing.process import (
    ChildProcess,
    ProcessExitedError,
    ProcessNotReadyError,
    ProcessRunningError,
    signal_and_wait,
)

# A child that says it is up, then waits for a signal; SIGTERM ends it with status 0.
SLEEPER = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"
    "print('up', flush=True)\n"
    "time.sleep(60)\n"
)


def python(
    tmp_path: Path,
    code: str,
    *,
    ready: Callable[[], bool] | None = None,
    name: str = "process",
    start_timeout: float = 30.0,
) -> ChildProcess:
    return ChildProcess(
        tmp_path / "out.log",
        [sys.executable, "-c", code],
        name=name,
        ready=ready,
        start_timeout=start_timeout,
    )


def test_start_waits_for_ready_and_stop_is_a_clean_sigterm(tmp_path: Path) -> None:
    process = python(tmp_path, SLEEPER, ready=lambda: "up" in (tmp_path / "out.log").read_text())
    with process:
        assert process.running and "up" in process.output()
        with pytest.raises(ProcessRunningError):
            process.start()
    assert not process.running
    assert process.stop() == 0  # idempotent: the same status again


def test_kill_is_sigkill_and_the_process_can_start_again(tmp_path: Path) -> None:
    process = python(tmp_path, SLEEPER).start()
    assert process.kill() == -signal.SIGKILL
    process.start()
    assert process.running
    assert process.stop(signal.SIGINT, timeout=5) == -signal.SIGINT  # no SIGINT handler


def test_exit_while_starting_raises_with_the_output(tmp_path: Path) -> None:
    code = "print('bad configuration', flush=True); raise SystemExit(3)"
    process = python(tmp_path, code, ready=lambda: False, name="the thing")
    with pytest.raises(ProcessExitedError, match=r"(?s)the thing exited with 3.*bad configuration"):
        process.start()


def test_not_ready_in_time_kills_it(tmp_path: Path) -> None:
    process = python(tmp_path, SLEEPER, ready=lambda: False, start_timeout=0.3)
    with pytest.raises(ProcessNotReadyError, match="not ready within 0.3s"):
        process.start()
    assert not process.running and process.proc is not None
    assert process.proc.returncode == -signal.SIGKILL


def test_a_failing_probe_leaves_nothing_running(tmp_path: Path) -> None:
    def probe() -> bool:
        raise ValueError("probe bug")

    process = python(tmp_path, SLEEPER, ready=probe)
    with pytest.raises(ValueError, match="probe bug"):
        process.start()
    assert not process.running


def test_never_started(tmp_path: Path) -> None:
    process = python(tmp_path, SLEEPER)
    assert process.stop() is None and process.kill() is None
    assert signal_and_wait(None, signal.SIGTERM, 1) is None
    assert process.output() == "" and process.output_tail() == "(no output)"
