"""Whether this run is a CI run: there a missing dependency (Java, ZooKeeper, Spark) is a
failure, not a skip — ``make system-deps`` installs them, so a skip would hide a broken box."""

from __future__ import annotations

import os

# The spellings CI services use for a true ``CI`` variable (GitHub Actions, GitLab: "true").
_TRUE = frozenset({"1", "true", "yes"})


def in_ci() -> bool:
    """True when the ``CI`` environment variable is ``1``, ``true`` or ``yes`` (any case).
    Thread-safe (reads the environment)."""
    return os.environ.get("CI", "").strip().lower() in _TRUE
