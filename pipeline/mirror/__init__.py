"""The mirror: consumers in the offline datacenter copying the live clusters (paper §4).

``config`` (``conf/mirror.properties``, MirrorMaker 2's key names), ``mirror`` (the copy loop
and its lag), ``metrics`` (Prometheus). Uses ``sluice.pipeline.lineage``.
"""
