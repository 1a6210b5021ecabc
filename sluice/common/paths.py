"""Where data lives, written as a URI: ``to_uri("./warehouse")`` is ``file:///abs/warehouse``.

Every table location Sluice hands to Spark or pyarrow is a URI with a scheme, so the same
string means the same place on the driver and on executors (a relative path would be resolved
against each process's working directory). URIs that already have a scheme (``hdfs://``,
``file://``, ``s3a://``) pass through without their trailing slash. Pure; thread-safe.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

__all__ = ["to_uri"]


def to_uri(path: str) -> str:
    """A plain local path becomes an absolute ``file://`` URI; URIs pass through."""
    if urlsplit(path).scheme:
        return path.rstrip("/")
    return "file://" + os.path.abspath(path)
