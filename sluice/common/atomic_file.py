"""``write_atomically``: replace a small file so that a crash leaves the old or the new content,
never a mix — write a temporary file beside it, fsync it, rename it over the file, fsync the
directory (so the rename itself survives a crash).

``mode`` is the new file's permission bits (0600 for files holding credentials); the umask
applies as to any ``open``. Thread-safe only per path: two writers of one path must serialize
(they share the temporary name).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["write_atomically"]


def write_atomically(path: Path, text: str, *, mode: int = 0o666) -> None:
    """Replace ``path``'s content with ``text`` (UTF-8), crash-safe; see the module docstring."""
    tmp = path.with_name(path.name + ".tmp")
    descriptor = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(tmp, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
