"""The audit (paper §4): did every message the producers published reach every tier?

``producer`` (the auditing producer and its counts), ``counts`` (the Spark job's counts per
tier and window), ``report`` (the verdict and its files), ``audit`` (configuration and the run).
May import ``sluice.pipeline.source``, ``table``, ``lineage`` and ``sluice.schemas``.
"""
