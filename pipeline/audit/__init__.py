"""The audit (paper §4): did every message the producers published reach every tier?

``producer`` (the auditing producer and its counts), ``config`` (``AuditConfig``:
``conf/audit.properties``), ``counts`` (the Spark job's counts per tier and window), ``report``
(the verdict and its files), ``preflight`` (what a run checks before Spark starts), ``run``
(one audit: check, count, judge, report).
May import ``sluice.common``, ``sluice.schemas``, ``sluice.pipeline.lineage`` and, for reading
the tiers, ``sluice.pipeline.source`` and ``sluice.pipeline.table``; not the mirror or the
load. ``producer`` (it runs in the applications) and ``config`` need only the base install; the
rest needs the ``spark`` extra, with pyspark imported only inside the functions that run Spark.
"""
