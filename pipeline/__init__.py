"""Sluice's client side: everything that reads from or writes to brokers, one package each.

===================  ===========================================================================
``source``           the ``sluice`` Spark data source: options, offset ranges, split reader,
                     partition metadata, Avro columns
``sink``             the ``sluice`` format's writers: DataFrames into topics (options, columns,
                     the write task, Avro values), at-least-once like Spark's Kafka sink
``table``            the warehouse table: filesystem access, offsets manifest, atomic commit
``load``             the nightly load: config, run, run report (uses ``source`` and ``table``)
``mirror``           live clusters into the offline cluster (uses ``lineage``)
``audit``            producer-side counts and the Spark job that compares every tier
``consumer``         the paper's ZooKeeper-coordinated consumer and the partition assignors
``lineage``          the ``sluice-lineage`` header (a leaf shared by mirror and audit)
===================  ===========================================================================

It may import ``sluice.common``, ``sluice.schemas`` and (for the ZooKeeper layout only)
``sluice.broker.cluster.zk_data``; never ``sluice.cli`` or ``sluice.jobs``.
"""
