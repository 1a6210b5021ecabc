"""The ``sluice`` sink: DataFrames written into Kafka topics, batch and streaming.

``data_sink`` (the Spark writers ``SluiceBatchWriter`` / ``SluiceStreamWriter``, the lifecycle
and the at-least-once guarantee), ``options`` (Spark's Kafka sink options, parsed), ``columns``
(the columns a DataFrame must have, checked on the driver), ``write_task`` (one executor task:
producer, delivery reports), ``avro_values`` (struct values as registry-framed Avro).
``options`` imports without Spark; the others need pyspark. May import ``sluice.common``,
``sluice.schemas`` and ``sluice.pipeline.kafka_settings`` (the Java client keys it translates
as the source does); nothing of ``sluice.pipeline.source``, which imports the writers for
``SluiceDataSource``.
"""
