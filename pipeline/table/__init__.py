"""The warehouse table: Parquet files and their offsets, published in one atomic rename.

``filesystem`` (``pyarrow.fs`` plus the no-replace rename it lacks), ``manifest`` (the offsets
manifest of a run), ``commit`` (staging, publishing and reading published runs). May import
``sluice.common`` and ``sluice.pipeline.source.ranges`` (``OffsetRange``, the one range type,
and ``DataLoss``).
"""
