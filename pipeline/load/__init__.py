"""The nightly load: Kafka topics into a Parquet table, data and offsets in one atomic step.

``config`` (``LoadConfig``, ``CONFIG_DEF``: every key of ``conf/nightly_load.properties`` declared
once, parsed and documented from the declaration), ``run`` (``run_load``: plan, read+write, verify,
publish), ``split_writer`` (one executor task: fetch a split, write its Parquet files), ``verify``
(every planned range accounted for before anything is published), ``report`` (the run report: JSON
beside the table and a summary table), ``progress`` (splits done, rows/s and ETA while the job
runs), ``session`` (the Spark session and the filesystem check), ``errors`` (one exception per
failure mode). May import ``sluice.common``, ``sluice.pipeline.kafka_settings`` (the config's Java
client keys, translated as the source's), ``sluice.pipeline.source`` (to plan and read: ranges,
metadata, split reader, typed columns) and ``sluice.pipeline.table`` (to stage and publish); not the
sink, the mirror, the audit or the consumer. The package needs the ``spark`` extra (``session``
imports pyspark, ``verify`` and ``report`` pyarrow).
"""
