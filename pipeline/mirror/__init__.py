"""The mirror: consumers in the offline datacenter copying the live clusters (paper §4).

``config`` (``MirrorConfig``: ``conf/mirror.properties``, MirrorMaker 2's key names), ``mirror``
(the copy loop per source cluster, the process that runs them, and the group's lag),
``target_topics`` (target topics created, grown and config-synced like the source's),
``topic_configs`` (which topic configs are copied: MirrorMaker 2's filter), ``offset_store``
(exactly-once mode: the source positions kept in the target, the protocol), ``target_transaction``
(the transactional target producer's errors sorted into retry, abort, fenced), ``errors`` (the
loop's failures), ``metrics`` (Prometheus). May import ``sluice.common`` and
``sluice.pipeline.lineage`` (besides confluent-kafka and prometheus-client); nothing of Spark,
pyarrow or the other pipeline subsystems, so a mirror host needs only the base install.
"""
