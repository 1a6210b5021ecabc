"""Sluice's server side: a Kafka broker, in sub-packages that each import only those named
before them here (the order of the import graph; ``tests/test_architecture.py`` checks that it
has no circle and that ``sluice.broker``, one layer above ``sluice.common`` and beside
``sluice.schemas``, imports nothing else of Sluice — no ``schemas``, ``pipeline`` or CLI):
``log`` (partition storage, laid out on disk as Kafka lays it out), ``protocol`` (the sans-IO
Kafka codec and ``Errors``, the error-code registry; it uses ``log``'s record formats),
``security`` (SASL PLAIN and SCRAM, ACLs, TLS keys; sans-IO), ``cluster`` (topics, partitions,
leaders and the controller, in the log dirs or ZooKeeper), ``groups`` (the group coordinator
and ``__consumer_offsets``), ``replication`` (the ISR: leaders, followers, the replica
manager), ``transactions`` (the transaction coordinator and ``__transaction_state``), the
module ``config`` (``server.properties`` as ``BrokerConfig``), and at the top ``server`` (the
asyncio broker, its per-API handlers and ``error_mapping``, where exceptions become Kafka
error codes), the only one that may import all the others.
"""
