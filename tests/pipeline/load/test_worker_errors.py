"""A failed read+write job is reduced to its cause line (``run._from_worker``), as a real Spark
job's exception carries it: the Python worker's traceback inside Spark's ``PythonException``."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.pipeline.load.errors import LoadError, UnreachableError
from sluice.pipeline.load.run import _from_worker
from sluice.pipeline.source.split_reader import BrokersUnreachableError, DataLossError


def _failing_job(spark: Any, exc: Exception) -> Exception:
    def fail(_: Any) -> Any:
        raise exc

    try:
        spark.sparkContext.parallelize([1], 1).mapPartitions(fail).collect()
    except Exception as caught:  # noqa: BLE001 - Spark's own exception type
        return caught
    raise AssertionError("the job did not fail")


@pytest.mark.parametrize(
    ("raised", "kind", "line"),
    [
        (DataLossError("t-0: expected offsets [0, 5) in the log"), LoadError,
         "DataLossError: t-0: expected offsets [0, 5) in the log"),
        (BrokersUnreachableError("t-0: no record for 9s; brokers not answering: h:1 (3 ...)"),
         UnreachableError,
         "BrokersUnreachableError: t-0: no record for 9s; brokers not answering: h:1 (3 ...)"),
    ],
)  # fmt: skip
def test_a_worker_exception_becomes_its_cause_line(
    spark: Any, raised: Exception, kind: type[Exception], line: str
) -> None:
    reduced = _from_worker(_failing_job(spark, raised))
    assert type(reduced) is kind
    assert str(reduced) == line
    assert "\n" not in str(reduced)


def test_other_exceptions_stay_as_they_are() -> None:
    exc = RuntimeError("plain")
    assert _from_worker(exc) is exc
