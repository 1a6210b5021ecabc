"""``ShareStateStore``: the durable state of share-partitions, one file per share group.

Kafka persists share-partition state through its share coordinator into the replicated
``__share_group_state`` topic. This store is the standalone equivalent: a JSON file per group
in ``<log dir>/__share_group_state/``, named by the group id's UTF-8 bytes in hex (group ids may
hold any character)::

    {"group": "<group id>",
     "partitions": {"<topic>:<partition>": {"start": <start offset>,
                                            "records": [[offset, state, delivery count], ...]}}}

A write replaces the whole file atomically (temporary file, fsync, rename, fsync of the
directory), so after a crash — kill -9 included — the file is the last completed write: what
was acknowledged stays acknowledged. It lives on one broker's disk, so it does not survive
the loss of that broker (cluster failover needs the replicated topic; not built here).

Not thread-safe: used on the broker's event loop.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

DIRECTORY = "__share_group_state"

#: (start offset, [(offset, state, delivery count), ...])
PartitionState = tuple[int, list[tuple[int, int, int]]]


class ShareStateStore:
    """See the module docstring."""

    def __init__(self, log_dir: str | Path) -> None:
        self.path = Path(log_dir) / DIRECTORY
        self._groups: dict[str, dict[str, PartitionState]] = {}

    def _file(self, group_id: str) -> Path:
        return self.path / f"{group_id.encode().hex()}.json"

    def load(self, group_id: str) -> dict[str, PartitionState]:
        """``"<topic>:<partition>"`` -> state, as last written (empty if never)."""
        if group_id not in self._groups:
            states: dict[str, PartitionState] = {}
            try:
                doc: Any = json.loads(self._file(group_id).read_text())
            except FileNotFoundError:
                doc = {"partitions": {}}
            for key, value in doc["partitions"].items():
                states[key] = (
                    int(value["start"]),
                    [(int(o), int(s), int(c)) for o, s, c in value["records"]],
                )
            self._groups[group_id] = states
        return self._groups[group_id]

    def groups(self) -> list[str]:
        """Every group with a state file."""
        if not self.path.is_dir():
            return []
        return sorted(bytes.fromhex(p.stem).decode() for p in self.path.glob("*.json"))

    def write(self, group_id: str, changed: dict[str, PartitionState]) -> None:
        """Record ``changed`` partitions' states durably (see the module docstring)."""
        states = self.load(group_id)
        states.update(changed)
        doc = {
            "group": group_id,
            "partitions": {
                key: {"start": start, "records": records}
                for key, (start, records) in sorted(states.items())
            },
        }
        self.path.mkdir(parents=True, exist_ok=True)
        target = self._file(group_id)
        tmp = target.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def delete(self, group_id: str, keys: list[str] | None = None) -> None:
        """Forget some partitions of a group, or the whole group (``keys`` None)."""
        if keys is None:
            self._groups.pop(group_id, None)
            self._file(group_id).unlink(missing_ok=True)
            return
        states = self.load(group_id)
        for key in keys:
            states.pop(key, None)
        self.write(group_id, {})
