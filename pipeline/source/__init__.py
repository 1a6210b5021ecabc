"""The ``sluice`` PySpark data source: Kafka topics as a DataFrame, batch and streaming.

``data_source`` (the Spark ``DataSource`` and its readers), ``ranges`` (Spark's Kafka options
and the offset ranges they resolve to), ``split_reader`` (an executor fetching one range),
``metadata`` (the driver's view of partitions and log bounds), ``avro_columns`` (registry-framed
Avro values as typed columns). May import ``sluice.common`` and ``sluice.schemas``.
"""
