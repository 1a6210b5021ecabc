"""Sluice's client side: everything that reads from or writes to brokers, one package each.

===================  ===========================================================================
``source``           the ``sluice`` Spark data source: options, offset ranges, split reader,
                     partition metadata, Avro columns; its ``SluiceDataSource`` is the format's
                     one class, handing writes to ``sink``
``sink``             the ``sluice`` format's writers: DataFrames into topics (options, columns,
                     the write task, Avro values), at-least-once like Spark's Kafka sink
``table``            the warehouse table: filesystem access, offsets manifest, atomic commit
``load``             the nightly load: config, plan, per-split writer, verify, run report (uses
                     ``source`` and ``table``)
``mirror``           live clusters into the offline cluster (uses ``lineage``)
``audit``            producer-side counts and the Spark job that compares every tier
``consumer``         the paper's ZooKeeper-coordinated consumer and the partition assignors
``lineage``          the ``sluice-lineage`` header (a leaf shared by mirror and audit)
``kafka_settings``   a Java client's ``kafka.*`` keys as librdkafka's (a leaf shared by source,
                     sink and load)
===================  ===========================================================================

Each package's ``__init__`` says what it may import (``tests/test_architecture.py`` checks it).
The whole may import ``sluice.common``, ``sluice.schemas`` and (for the ZooKeeper layout only)
``sluice.broker.cluster.zk_data``; never the rest of ``sluice.broker``, ``sluice.cli`` or
``sluice.jobs``.
"""
