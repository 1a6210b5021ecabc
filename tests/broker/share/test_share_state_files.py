"""The share-group state files of an earlier Sluice: read (a file that does not parse is named)
and removed. ``tests/broker/server/handlers/test_share_state_migration`` has a broker move them
into ``__share_group_state``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sluice.broker.share.share_state_files import (
    ShareStateFileError,
    read_state_files,
    remove_state_files,
)


def write_old_file(log_dir: Path, group: str, partitions: dict[str, object]) -> Path:
    directory = log_dir / "__share_group_state"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{group.encode().hex()}.json"
    path.write_text(json.dumps({"group": group, "partitions": partitions}))
    return path


def test_read_and_remove(tmp_path: Path) -> None:
    assert read_state_files(tmp_path) == {}
    write_old_file(tmp_path, "g-é", {"t:0": {"start": 4, "records": [[4, 0, 1], [5, 2, 1]]}})
    assert read_state_files(tmp_path) == {"g-é": {"t:0": (4, [(4, 0, 1), (5, 2, 1)])}}
    remove_state_files(tmp_path)
    assert not (tmp_path / "__share_group_state").exists()
    bad = write_old_file(tmp_path, "g", {"t:0": {"start": "x"}})
    with pytest.raises(ShareStateFileError, match=str(bad)):
        read_state_files(tmp_path)
