"""Sluice: log transport and ingestion after the 2011 LinkedIn Kafka paper.

One import namespace, layered; each package imports only from the layers below it:

=====================  ==============================================================
``sluice.cli``         the ``sluice`` command (top: may import everything below)
``sluice.jobs``        Spark applications and demos (``spark-submit``, ``make demo``)
``sluice.testing``     real processes for tests, demos and benchmarks
``sluice.pipeline``    the client side: Spark source, table commit, load, mirror, audit,
                       the paper's ZooKeeper consumer
``sluice.broker``      the Kafka-protocol broker: log, protocol, server, cluster
``sluice.schemas``     the Avro schema registry and the wire-format serde
``sluice.common``      what every layer shares: ``.properties``, logging, option parsing
=====================  ==============================================================

In the repository the folders keep the design card's top level (``broker/``, ``pipeline/``,
``schemas/``, ``jobs/``); ``setup.py`` maps them under this namespace when installed.
"""

__version__ = "0.1.0"
