"""The ``sluice`` format with the sink's writers, for the sink tests.

Until ``SluiceDataSource`` (``sluice.pipeline.source.data_source``) has ``writer`` and
``streamWriter`` itself, :func:`register_sink` registers ``SinkTestDataSource`` — the source
plus the two methods, exactly as ``SluiceDataSource`` is to get them — under the same name;
once it has them, the real class is registered. Pickled by value, so Spark's Python workers
need not import the tests.
"""

from __future__ import annotations

import sys
from typing import Any

from pyspark import cloudpickle
from pyspark.sql.datasource import DataSource

from sluice.pipeline.sink.data_sink import SluiceBatchWriter, SluiceStreamWriter
from sluice.pipeline.source.data_source import SluiceDataSource, register


class SinkTestDataSource(SluiceDataSource):
    """``format("sluice")``: the source, and the sink's writers."""

    def writer(self, schema: Any, overwrite: bool) -> SluiceBatchWriter:
        return SluiceBatchWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: Any, overwrite: bool) -> SluiceStreamWriter:
        return SluiceStreamWriter(self.options, schema, overwrite)


cloudpickle.register_pickle_by_value(sys.modules[__name__])


def register_sink(spark: Any) -> None:
    """Make ``format("sluice")`` writable in ``spark``."""
    if SluiceDataSource.writer is not DataSource.writer:  # the source has the sink already
        register(spark)
    else:
        spark.dataSource.register(SinkTestDataSource)
