"""``tests.compat.report``: JUnit XML read back into outcomes, and the Markdown table of them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.compat import report

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="test.integration.test_admin_integration" name="test_ok" time="0.1"/>
<testcase classname="test.integration.test_admin_integration" name="test_bad[gzip]">
  <failure message="kafka.errors.UnsupportedVersionError: DescribeConfigs&#10;more">tb</failure>
</testcase>
<testcase classname="test.integration.test_ssl_integration.TestSSLConnection" name="test_x">
  <skipped type="pytest.skip" message="Sluice | PLAINTEXT only">skip</skipped>
</testcase>
<testcase classname="test.integration.test_producer_integration" name="test_fixture">
  <error message="failed on setup with &quot;OSError&quot;">tb</error>
</testcase>
</testsuite></testsuites>
"""


def outcomes(tmp_path: Path) -> list[report.Outcome]:
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT, encoding="utf-8")
    return report.read_junit(path)


def test_each_case_becomes_an_outcome_with_its_node_id_and_cause(tmp_path: Path) -> None:
    admin = "test/integration/test_admin_integration.py"
    assert outcomes(tmp_path) == [
        report.Outcome(f"{admin}::test_ok", "passed"),
        report.Outcome(
            f"{admin}::test_bad[gzip]",
            "failed",
            "kafka.errors.UnsupportedVersionError: DescribeConfigs more",
        ),
        report.Outcome(
            "test/integration/test_ssl_integration.py::TestSSLConnection::test_x",
            "skipped",
            "Sluice | PLAINTEXT only",
        ),
        report.Outcome(
            "test/integration/test_producer_integration.py::test_fixture",
            "error",
            'failed on setup with "OSError"',
        ),
    ]


def test_a_long_cause_is_cut_to_the_limit() -> None:
    cause = report.one_line("x " * 500)
    assert len(cause) == report.CAUSE_LIMIT and cause.endswith("…")


def test_json_and_markdown_list_counts_and_every_test_that_did_not_pass(tmp_path: Path) -> None:
    header = {"client": "kafka-python 9.9", "kafka_version": "2.4.0"}
    modes = {
        "standalone": report.ModeResult(outcomes(tmp_path), 12.0),
        "cluster": report.ModeResult(note="cluster deployment failed: no java"),
    }
    report.write_json(tmp_path / "results.json", header, modes)
    document = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert document["modes"]["standalone"]["counts"] == {
        "passed": 1,
        "failed": 1,
        "error": 1,
        "skipped": 1,
    }
    assert document["modes"]["cluster"]["note"] == "cluster deployment failed: no java"

    table = report.markdown(header, modes)
    assert "| standalone | 1 | 1 | 1 | 1 | 12 |" in table
    assert "| `test/integration/test_admin_integration.py::test_ok`" not in table
    assert "| skipped | Sluice \\| PLAINTEXT only |" in table  # a | in a cause is escaped
    assert "**Incomplete:** cluster deployment failed: no java" in table
