"""The ``sluice`` sink: DataFrames written into Kafka topics, batch and streaming.

``data_sink`` (the Spark writers ``SluiceBatchWriter`` / ``SluiceStreamWriter``, the lifecycle
and the at-least-once guarantee), ``options`` (Spark's Kafka sink options, parsed), ``columns``
(the columns a DataFrame must have, checked on the driver), ``write_task`` (one executor task:
producer, delivery reports), ``wire_formats`` (the typed value formats, named once),
``writer_schema`` (a write's schema, chosen on the driver), ``value_encoders`` (its format's
encoder),
``avro_values``, ``json_values``, ``protobuf_values`` (struct values as registry-framed Avro,
JSON, Protobuf), ``protobuf_descriptors`` (Protobuf's message indexes and message classes) and
``registry_schemas`` (registered schemas by id, parsed once per process) — the last three
shared with the source, which imports the sink. ``options`` imports without Spark; the
others need pyspark. May import ``sluice.common``,
``sluice.schemas`` and ``sluice.pipeline.kafka_settings`` (the Java client keys it translates
as the source does); nothing of ``sluice.pipeline.source``, which imports the writers for
``SluiceDataSource``.
"""
