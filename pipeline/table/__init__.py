"""The warehouse table: Parquet files and their offsets, published in one atomic step.

The Camus-style layout (``table.format=parquet``): ``filesystem`` (``pyarrow.fs`` plus the
no-replace rename it lacks), ``manifest`` (the offsets manifest of a run), ``commit`` (staging,
publishing and reading published runs). Apache Iceberg (``table.format=iceberg``):
``iceberg_catalog`` (the ``iceberg.*`` keys and the catalog they open), ``partition_spec``
(``partition-by`` transforms), ``iceberg_schema`` (Arrow to Iceberg, and each schema change
checked), ``iceberg_data_file`` (executors' Iceberg-ready Parquet), ``iceberg_commit`` (one
conditional catalog commit of data and offsets), ``iceberg_run`` (a load run's tables from
plan to commit: what the load calls), ``iceberg_maintenance`` (describe, compact,
expire snapshots, remove orphans). May import
``sluice.common`` and ``sluice.pipeline.source.ranges`` (``OffsetRange``, the one range type,
and ``DataLoss``).
"""
