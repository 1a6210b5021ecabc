"""The ``sluice`` PySpark data source: Kafka topics as a DataFrame, batch and streaming.

``data_source`` (the Spark ``DataSource`` and its readers), ``options`` (Spark's Kafka source
options, parsed), ``ranges`` (``OffsetRange``, the one range type: resolution against the log
and splitting), ``read_plan`` (a batch read planned by the caller, as one option),
``split_reader`` (an executor fetching one range), ``metadata`` (the driver's view of
partitions and log bounds), ``avro_columns`` (registry-framed Avro values as typed columns).
May import ``sluice.common`` and ``sluice.schemas``.
"""
