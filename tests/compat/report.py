"""A compat run's results: pytest's JUnit XML read back into outcomes, written as
``build/compat/results.json`` and as the Markdown table the README carries.

One :class:`Outcome` per test case: its pytest node id as the suite's own runner prints it
(``test/integration/test_admin_integration.py::test_ok``, a class in between when there is one),
one of :data:`OUTCOMES`, and a one-line cause for anything but a pass — the ``message``
attribute pytest writes on ``<failure>``, ``<error>`` and ``<skipped>``, whitespace collapsed
and cut to :data:`CAUSE_LIMIT` characters (:func:`one_line`).

``results.json``::

    {"client": "kafka-python 3.0.12", "kafka_version": "2.4.0",     # the header, as given
     "modes": {"standalone": {"counts": {"passed": 43, "failed": 8, "error": 0, "skipped": 16},
                              "seconds": 151.9,
                              "note": "",          # why the mode is incomplete, if it is
                              "tests": [{"id": ..., "outcome": ..., "cause": ...}, ...]},
               "cluster": {...}}}

The Markdown names the client and version, has one row of counts per mode, then per mode the
note (``**Incomplete:** …``) and every test that did not pass with its cause; a ``|`` in a cell
is escaped. Pure functions over values: thread-safe.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "CAUSE_LIMIT",
    "OUTCOMES",
    "ModeResult",
    "Outcome",
    "markdown",
    "one_line",
    "read_json",
    "read_junit",
    "write_json",
]

# Long enough for any client error seen so far (the longest is about 170 characters), short
# enough that a table row stays readable.
CAUSE_LIMIT = 200
# In the order the counts are shown; a JUnit child element names every outcome but "passed".
OUTCOMES = ("passed", "failed", "error", "skipped")
# When a case carries more than one child (a failed call and then a failed teardown), the
# first of these it has decides its outcome.
_CHILD_OUTCOMES = (("failure", "failed"), ("error", "error"), ("skipped", "skipped"))


class ReportFormatError(ValueError):
    """A JUnit report or a ``results.json`` that is not what this module writes or reads."""


@dataclass(frozen=True)
class Outcome:
    """One test case: ``id`` (pytest's node id), ``outcome`` (one of :data:`OUTCOMES`) and,
    unless it passed, a one-line ``cause``."""

    id: str
    outcome: str
    cause: str = ""


@dataclass
class ModeResult:
    """What one deployment (``standalone``, ``cluster``) gave: the outcomes, the suite's wall
    time in seconds, and a ``note`` saying why the run is incomplete (empty when it is not)."""

    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    note: str = ""

    @property
    def counts(self) -> dict[str, int]:
        """How many tests ended in each of :data:`OUTCOMES`, in that order."""
        counts = dict.fromkeys(OUTCOMES, 0)
        for outcome in self.outcomes:
            counts[outcome.outcome] += 1
        return counts

    @property
    def complete(self) -> bool:
        """Whether the suite ran to the end and reported (no note)."""
        return not self.note

    @property
    def ok(self) -> bool:
        """Complete, and nothing failed or errored."""
        counts = self.counts
        return self.complete and counts["failed"] == 0 and counts["error"] == 0


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines too) made one space, cut to
    :data:`CAUSE_LIMIT` characters with a trailing ``…`` when longer."""
    line = " ".join(text.split())
    if len(line) > CAUSE_LIMIT:
        line = line[: CAUSE_LIMIT - 1] + "…"
    return line


def node_id(classname: str, name: str) -> str:
    """pytest's node id from a JUnit ``classname`` and ``name``:
    ``test.integration.test_x.TestY`` + ``test_z`` → ``test/integration/test_x.py::TestY::test_z``.

    The module path ends before the first dotted part that starts with an upper-case letter:
    pytest collects classes named ``Test*`` (``python_classes``) and modules ``test_*.py``.
    """
    parts = classname.split(".")
    at = next((i for i, part in enumerate(parts) if part[:1].isupper()), len(parts))
    module = "/".join(parts[:at]) + ".py"
    return "::".join([module, *parts[at:], name])


def read_junit(path: Path) -> list[Outcome]:
    """Every ``<testcase>`` of the JUnit XML at ``path`` as an :class:`Outcome`, in file order.
    A case named twice (pytest reports a teardown error as a second case) keeps its first
    place and the worse outcome. A document that is not JUnit raises
    :class:`ReportFormatError`."""
    try:
        root = ElementTree.parse(path).getroot()
    except ElementTree.ParseError as exc:
        raise ReportFormatError(f"{path}: expected JUnit XML, found a parse error: {exc}") from None
    if root.tag not in ("testsuites", "testsuite"):
        raise ReportFormatError(f"{path}: expected <testsuites> or <testsuite>, found <{root.tag}>")
    found: dict[str, Outcome] = {}
    for case in root.iter("testcase"):
        outcome = _outcome(case)
        earlier = found.get(outcome.id)
        if earlier is None or _rank(outcome) < _rank(earlier):
            found[outcome.id] = outcome
    return list(found.values())


def _outcome(case: ElementTree.Element) -> Outcome:
    test = node_id(case.get("classname", ""), case.get("name", ""))
    for tag, outcome in _CHILD_OUTCOMES:
        child = case.find(tag)
        if child is not None:
            # pytest puts the exception line (or the skip reason) in ``message`` and the
            # traceback in the text; the text's first line stands in when there is no message.
            message = child.get("message") or (child.text or "").strip().split("\n", 1)[0]
            return Outcome(test, outcome, one_line(message))
    return Outcome(test, "passed")


def _rank(outcome: Outcome) -> int:
    """Lower is worse: failed, error, skipped, passed."""
    order = [outcome for _, outcome in _CHILD_OUTCOMES] + ["passed"]
    return order.index(outcome.outcome)


def write_json(path: Path, header: Mapping[str, str], modes: Mapping[str, ModeResult]) -> None:
    """Write ``results.json`` (the layout in the module docstring) to ``path``."""
    document: dict[str, Any] = {
        **header,
        "modes": {
            mode: {
                "counts": result.counts,
                "seconds": round(result.seconds, 1),
                "note": result.note,
                "tests": [
                    {"id": o.id, "outcome": o.outcome, "cause": o.cause} for o in result.outcomes
                ],
            }
            for mode, result in modes.items()
        },
    }
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def read_json(path: Path) -> tuple[dict[str, str], dict[str, ModeResult]]:
    """The header and the modes of a ``results.json`` written by :func:`write_json`; one that
    is not raises :class:`ReportFormatError`."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        header = {key: str(value) for key, value in document.items() if key != "modes"}
        modes = {
            mode: ModeResult(
                [Outcome(t["id"], t["outcome"], t["cause"]) for t in result["tests"]],
                float(result["seconds"]),
                str(result["note"]),
            )
            for mode, result in document["modes"].items()
        }
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ReportFormatError(
            f"{path}: expected a compat results.json, found {type(exc).__name__}: {exc}"
        ) from None
    return header, modes


def markdown(header: Mapping[str, str], modes: Mapping[str, ModeResult]) -> str:
    """The results as Markdown (see the module docstring), ending with a newline."""
    lines = [
        f"{header['client']}'s integration suite (`KAFKA_VERSION={header['kafka_version']}`) "
        "against Sluice.",
        "",
        _row(["mode", *OUTCOMES, "seconds"]),
        "|---|" + "---:|" * (len(OUTCOMES) + 1),
    ]
    for mode, result in modes.items():
        if result.outcomes:
            cells = [str(n) for n in result.counts.values()] + [f"{result.seconds:.0f}"]
        else:
            cells = ["—"] * (len(OUTCOMES) + 1)
        lines.append(_row([mode, *cells]))
    for mode, result in modes.items():
        lines += ["", f"### {mode}", ""]
        if result.note:
            lines += [f"**Incomplete:** {result.note}", ""]
        not_passed = [o for o in result.outcomes if o.outcome != "passed"]
        if not_passed:
            lines += [_row(["test", "outcome", "cause"]), "|---|---|---|"]
            lines += [_row([f"`{o.id}`", o.outcome, o.cause]) for o in not_passed]
        elif result.outcomes:
            lines.append("Every test passed.")
    return "\n".join(lines) + "\n"


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"
