"""What every Sluice package shares: ``.properties`` files (``properties``), structured logging
(``logging_setup``), typed option parsers (``options``), Kafka's JAAS lines (``jaas``), TLS
contexts from ``ssl.*`` keys (``tls``), ``TopicPartition``, plain-text tables, path → URI
(``paths``), the crash-safe file replace (``atomic_file``) and a pause of the cyclic
garbage collector (``gc_pause``).

The bottom layer: it imports nothing from Sluice, and everything may import it.
"""
