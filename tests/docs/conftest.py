"""Fixtures of the manual's tests: the pipeline tests' broker, for the cluster recipe's load.

Imported, not redefined (``tests/pipeline/broker_fixture.py``): a session broker on a free port
and a fresh topic name per test. A run that collects ``tests/pipeline`` too starts one broker
for each folder.
"""

from tests.pipeline.broker_fixture import kafka_broker, topic_name  # noqa: F401
