"""The paper's consumer group, coordinated through ZooKeeper with no master (§3.2, Alg. 1).

``assignors`` (Range, RoundRobin, Sticky as pure functions), ``registry`` (the consumer
registries' znodes), ``connector`` (the group member and its rebalance). May import
``sluice.common`` and ``sluice.broker.cluster.zk_data`` (the brokers' znodes it reads).
"""
