"""bench.run's command line: what a run records as its command, which systems it selects."""

from __future__ import annotations

import pytest

from bench import run


def parsed(*argv: str) -> object:
    captured = {}

    def fake_save(self: object, command: str, mode: str | None = None) -> object:
        captured["command"] = command
        raise SystemExit(0)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(run.Results, "save", fake_save)
        mp.setattr(run, "GROUPS", {name: (title, lambda *_: None)
                                   for name, (title, _run) in run.GROUPS.items()})  # fmt: skip
        with pytest.raises(SystemExit):
            run.main(list(argv))
    return captured["command"]


def test_command_line_records_the_systems_chosen() -> None:
    assert parsed("--only", "peers", "--systems", "sluice,tansu") == (
        "python -m bench.run --quick --only peers --systems sluice,tansu"
    )
    assert parsed("--full", "--only", "peers") == "python -m bench.run --full --only peers"
    assert parsed("--only", "broker", "--loop", "uvloop") == (
        "python -m bench.run --quick --only broker --loop uvloop"
    )


def test_an_unknown_system_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        run.main(["--only", "peers", "--systems", "sluice,kafka"])
    assert exit_.value.code == 2
    assert "kafka" in capsys.readouterr().err


def test_profile_runs_only_when_asked() -> None:
    assert "profile" in run.GROUPS and "profile" in run.ON_REQUEST


def test_the_cluster_group_runs_in_a_plain_run_and_alone() -> None:
    assert "cluster" in run.GROUPS and "cluster" not in run.ON_REQUEST
    assert parsed("--only", "cluster") == "python -m bench.run --quick --only cluster"
    assert parsed("--full", "--only", "cluster") == "python -m bench.run --full --only cluster"
