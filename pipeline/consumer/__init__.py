"""The paper's consumer group, coordinated through ZooKeeper with no master (§3.2, Alg. 1).

``connector`` (the group member users make, ``ZookeeperConsumerConnector``), ``config`` (its
settings), ``rebalance`` (Algorithm 1 and the offset commits), ``owned`` (the owned partitions
and the generation that fences delivery), ``fetcher`` (the fetching thread), ``stream`` (the
streams users iterate), ``assignors`` (Range, RoundRobin, Sticky as pure functions),
``registry`` (the consumer registries' znodes). May import ``sluice.common`` and
``sluice.broker.cluster.zk_data`` (the brokers' znodes it reads).
"""
