"""The nightly load: Kafka topics into a Parquet table, data and offsets in one atomic step.

``run`` (the configuration and the load itself), ``report`` (the run report). Uses
``sluice.pipeline.source`` to read and ``sluice.pipeline.table`` to publish.
"""
