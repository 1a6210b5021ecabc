"""The nightly load's failures: one exception type per failure mode.

``LoadConfigError`` (a key is missing or malformed: exit 2) stands apart, with
``MissingTopicsError`` (a topic of ``topics`` does not exist: exit 2, naming the nearest
existing topics); every failure of a run is a ``LoadError`` (nothing published, no offset
moved: exit 1), and the subclasses name the failure modes a caller may want to tell apart:

* ``UnreachableError`` — a service did not answer (exit 3): the brokers at the start or while
  the splits waited (``stallTimeoutMs``), or the schema registry. The message names the
  addresses and, for a stall, the splits that were waiting.
* ``StrandedFilesError`` — the verify phase found planned ranges that Spark's tasks read and
  wrote but whose files (named in their task results) are not where the driver publishes: the
  executors write to a path the driver cannot see.
* ``FilesystemUnavailableError`` — the driver or the executors cannot open the table's
  filesystem with what the load uses there (pyarrow; on ``hdfs://`` that needs libhdfs),
  found before any record is read.

Plain data; thread-safe.
"""

from __future__ import annotations

__all__ = [
    "FilesystemUnavailableError",
    "LoadConfigError",
    "LoadError",
    "MissingTopicsError",
    "StrandedFilesError",
    "UnreachableError",
]


class LoadConfigError(ValueError):
    """A configuration key is missing or malformed; the message names the key."""


class LoadError(RuntimeError):
    """The run failed; nothing was published. The message says why."""


class StrandedFilesError(LoadError):
    """Planned ranges were read by Spark's tasks but their files are not where the driver
    publishes; the message names the ranges and the likely cause."""


class FilesystemUnavailableError(LoadError):
    """The driver or an executor cannot open the table's filesystem; checked before reading."""


class MissingTopicsError(LoadConfigError):
    """Topics the configuration names do not exist (and ``allowMissingTopics`` is false); the
    message names the nearest existing topics."""


class UnreachableError(LoadError):
    """A service the load needs did not answer; the message names its addresses."""
