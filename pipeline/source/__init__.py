"""The ``sluice`` PySpark data source: Kafka topics as a DataFrame, batch and streaming.

``data_source`` (``SluiceDataSource``, the class registered as the ``sluice`` format, and its
readers), ``options`` (Spark's Kafka source options, parsed), ``read_options`` (the read's
limits and consumer timeouts), ``option_names`` (every option name checked, a typo named),
``kafka_params`` (the ``kafka.*`` consumer settings: Spark's refusals, group ids),
``isolation`` (``kafka.isolation.level``, ``read_committed`` by default), ``ranges``
(``OffsetRange``, the one range type: resolution against the log and splitting),
``split_reader`` (an executor fetching one range; the consumer settings; ``SplitResult``, a
split's figures), ``metadata`` (the driver's view of partitions and log bounds),
``value_format`` (the typed formats named, each format's module chosen), ``typed_columns``
(what they share: reader schema, columns, batch decoder, error table), ``avro_columns``,
``json_schema_columns``, ``protobuf_columns`` (each format's type mapping and decoding),
``registry_schemas`` (registered schemas by id, parsed once per process).
May import ``sluice.common``, ``sluice.schemas``, ``sluice.pipeline.kafka_settings`` (the Java
client keys it translates as the sink does) and ``sluice.pipeline.sink``: the Python Data
Source API puts readers and writers on one ``DataSource`` class, so ``SluiceDataSource`` hands
writes to the sink's writers; the sink imports nothing of the source, so there is no circle.
"""
