"""Partition log storage, laid out on disk exactly as Kafka lays it out.

One on-disk structure per module: ``record_batch`` (the magic-2 batch header),
``offset_index`` (``.index``), ``time_index`` (``.timeindex``), ``log_segment`` (one
``.log`` file and its indexes), ``log`` (one partition), ``log_loader`` (finishing or undoing
an interrupted segment swap on open), ``checkpoint`` (offset checkpoint files),
``log_manager`` (log dirs, recovery, flush, retention, the cleaner thread).

Compaction (``cleanup.policy=compact``): ``cleaner`` (the pass and its threads),
``cleaner_manager`` (which log, how far: dirty ratio, compaction lags, checkpoints),
``offset_map`` (key → latest offset), ``record_filter`` (one batch rewritten),
``cleaner_config`` (broker-wide knobs), ``compaction_errors``.
"""
