"""Partition log storage, laid out on disk exactly as Kafka lays it out.

One on-disk structure per module: ``record_batch`` (the magic-2 batch header),
``offset_index`` (``.index``), ``time_index`` (``.timeindex``), ``log_segment`` (one
``.log`` file and its indexes), ``log`` (one partition), ``checkpoint`` (offset
checkpoint files), ``log_manager`` (log dirs, recovery, flush, retention).
"""
