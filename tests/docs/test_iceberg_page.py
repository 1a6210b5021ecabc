"""docs/iceberg.md: its key table is the declaration's, and its pyiceberg/DuckDB snippet runs.

* The block between ``<!-- generated: iceberg_catalog.CONFIG_DEF -->`` and ``<!-- end
  generated -->`` must equal ``iceberg_catalog.CONFIG_DEF.to_markdown()``: the page never
  hand-writes a key table that can drift from the keys.
* Each Python block marked ``<!-- recipe: read-... -->`` on the line before its fence is run as
  the page shows it, against a table ``sluice.page_views`` committed through ``IcebergRun``
  (600 rows over three days, partitioned by ``day(event_time)``) in the test's warehouse. The
  one thing the reader does by hand — naming their warehouse — the test does: the line
  ``warehouse = "/data/warehouse"`` becomes the test's path. The names the snippet leaves
  behind are then checked against the rows committed.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from sluice.pipeline.table.iceberg_catalog import CONFIG_DEF, IcebergConfig
from sluice.pipeline.table.iceberg_run import IcebergRun
from tests.pipeline.table.iceberg_rows import BASE, typed_rows

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "iceberg.md"
BEGIN = "<!-- generated: iceberg_catalog.CONFIG_DEF -->\n"
END = "<!-- end generated -->"
WAREHOUSE_LINE = 'warehouse = "/data/warehouse"  # the load\'s warehouse.path'
_RECIPE = re.compile(r"<!-- recipe: (read-[a-z-]+) -->\n```python\n(.*?)\n```", re.S)


def recipes(text: str) -> dict[str, str]:
    """``{name: code}`` of the page's marked Python blocks."""
    return {m.group(1): m.group(2) for m in _RECIPE.finditer(text)}


def test_the_key_table_is_rendered_from_the_declaration() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    block = text.split(BEGIN, 1)[1].split(END, 1)[0]
    assert block == CONFIG_DEF.to_markdown(), (
        "docs/iceberg.md's key table is stale: paste CONFIG_DEF.to_markdown() of "
        "sluice.pipeline.table.iceberg_catalog between its markers"
    )


def _commit_page_views(warehouse: Path) -> tuple[Any, str]:
    """A load's run of topic ``page_views``: 2 partitions x 300 records, event times over
    three days from ``BASE``; returns the rows and the run id."""
    props = {"iceberg.tables.default-partition-by": "day(event_time)"}
    config = IcebergConfig.from_properties(props, str(warehouse))
    run = IcebergRun.begin(config, ["page_views"])
    rows = typed_rows("page_views", 2, 0, 300)
    writers = run.writers(rows.schema)
    files = writers["page_views"].data.write(rows, "r1-page_views")
    run.commit(files, {"page_views": {0: 300, 1: 300}}, "r1")
    return rows, "r1"


def test_the_pyiceberg_and_duckdb_snippet_reads_the_committed_rows(tmp_path: Path) -> None:
    found = recipes(PAGE.read_text(encoding="utf-8"))
    assert set(found) == {"read-pyiceberg"}, found.keys()
    code = found["read-pyiceberg"]
    assert code.count(WAREHOUSE_LINE) == 1, "the snippet names its warehouse on one line"
    warehouse = tmp_path / "warehouse"
    rows, run_id = _commit_page_views(warehouse)

    names: dict[str, Any] = {}
    exec(compile(code.replace(WAREHOUSE_LINE, f"warehouse = {str(warehouse)!r}"), PAGE, "exec"),
         names)  # fmt: skip

    assert json.loads(names["offsets"]) == {"page_views": {"0": 300, "1": 300}}
    assert names["run_id"] == run_id
    day = dt.timedelta(days=1)
    expected = Counter((t - BASE) // day for t in rows["event_time"].to_pylist())
    assert names["per_day"] == [
        ((BASE + n * day).strftime("%Y-%m-%d"), expected[n]) for n in sorted(expected)
    ]
    assert sum(n for _, n in names["per_day"]) == rows.num_rows == 600
    march_2 = names["march_2"]
    assert march_2.column_names == ["event_time", "page", "partition", "offset"]
    assert march_2.num_rows == expected[1]
    assert {t.date() for t in march_2["event_time"].to_pylist()} == {dt.date(2024, 3, 2)}
