"""Offset checkpoint files: ``recovery-point-offset-checkpoint`` and
``log-start-offset-checkpoint`` in each log dir, in Kafka's text format::

    0                  version
    2                  number of entries
    page_views 0 1842  topic, partition, offset — one line each
    page_views 1 977

A checkpoint is written to ``<name>.tmp``, fsynced, renamed over the old file, and the
directory is fsynced, so a crash leaves either the old file or the new one. A file that does
not parse raises :class:`CorruptCheckpointError` naming the line; the caller then falls back to
the safe value (recovering from offset 0 / the first segment).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from sluice.broker.log.errors import StorageError

VERSION = 0


class CorruptCheckpointError(StorageError):
    """A checkpoint file does not follow the format above."""


class OffsetCheckpoint:
    """One checkpoint file. ``write`` is atomic; neither method is thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        lines = [str(VERSION), str(len(offsets))]
        lines += [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError:
            tmp.unlink(missing_ok=True)  # a full disk: the old file stays, whole
            raise
        fsync_dir(self.path.parent)

    def read(self) -> dict[tuple[str, int], int]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        lines = text.splitlines()
        if len(lines) < 2 or lines[0].strip() != str(VERSION):
            raise CorruptCheckpointError(
                f"{self.path}: expected version {VERSION} on line 1, "
                f"found {lines[0] if lines else 'an empty file'!r}"
            )
        try:
            count = int(lines[1])
        except ValueError:
            raise CorruptCheckpointError(
                f"{self.path}: expected an entry count on line 2, found {lines[1]!r}"
            ) from None
        if len(lines) - 2 != count:
            raise CorruptCheckpointError(
                f"{self.path}: expected {count} entries, found {len(lines) - 2}"
            )
        result: dict[tuple[str, int], int] = {}
        for n, line in enumerate(lines[2:], start=3):
            parts = line.split()
            if len(parts) != 3 or not parts[1].isdigit() or not parts[2].lstrip("-").isdigit():
                raise CorruptCheckpointError(
                    f"{self.path}: expected 'topic partition offset' on line {n}, found {line!r}"
                )
            result[(parts[0], int(parts[1]))] = int(parts[2])
        return result


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename or a new file in it survives a crash."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
