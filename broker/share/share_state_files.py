"""The share-group state files of earlier Sluice versions, read once to move them into
``__share_group_state``.

Before the replicated topic, a broker kept the state of the share-partitions it led in one
JSON file per group, ``<first log dir>/__share_group_state/<group id's UTF-8 bytes in hex>.json``::

    {"group": "<group id>",
     "partitions": {"<topic>:<partition>": {"start": <start offset>,
                                            "records": [[offset, state, delivery count], ...]}}}

:func:`read_state_files` reads them (a file that does not parse is named in a
``ShareStateFileError`` and left alone); once their states are committed in the topic,
:func:`remove_state_files` deletes them, so the move happens once. Not thread-safe; blocking
file I/O (a broker calls it once at startup).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from sluice.broker.share.share_state_log import PartitionState

__all__ = ["DIRECTORY", "ShareStateFileError", "read_state_files", "remove_state_files"]

DIRECTORY = "__share_group_state"


class ShareStateFileError(ValueError):
    """A state file of an earlier version does not hold what it should."""


def read_state_files(log_dir: str | Path) -> dict[str, dict[str, PartitionState]]:
    """Group id → ``"<topic>:<partition>"`` → state, of every file (empty if none)."""
    out: dict[str, dict[str, PartitionState]] = {}
    directory = Path(log_dir) / DIRECTORY
    if not directory.is_dir():
        return out
    for path in sorted(directory.glob("*.json")):
        try:
            doc = json.loads(path.read_text())
            out[str(doc["group"])] = {
                key: (int(v["start"]), [(int(o), int(s), int(c)) for o, s, c in v["records"]])
                for key, v in doc["partitions"].items()
            }
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ShareStateFileError(
                f"{path}: expected a share-group state file of an earlier Sluice, found "
                f"something else ({exc!r})"
            ) from None
    return out


def remove_state_files(log_dir: str | Path) -> None:
    """Delete the files (and their directory, once empty)."""
    directory = Path(log_dir) / DIRECTORY
    if not directory.is_dir():
        return
    for path in directory.glob("*.json"):
        path.unlink(missing_ok=True)
    for path in directory.glob("*.tmp"):
        path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # something else is in there: leave it
        directory.rmdir()
