"""FileSchemaStore against its contract: durability, atomic transactions, ids never reused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sluice.schemas.errors import StoreError
from sluice.schemas.file_store import FileSchemaStore
from sluice.schemas.store import StoredSchema, SubjectVersion


def test_state_survives_reopen(tmp_path: Path) -> None:
    store = FileSchemaStore(tmp_path)
    with store.transaction():
        sid = store.allocate_id()
        store.put_schema(StoredSchema(sid, '"string"', "fp1"))
        store.put_version(SubjectVersion("s", 1, sid))
    store.put_config(None, "FULL")
    store.put_config("s", "NONE")
    store.close()

    store = FileSchemaStore(tmp_path)
    try:
        assert store.get_schema(sid) == StoredSchema(sid, '"string"', "fp1", "AVRO")
        assert store.find_schema("fp1") == store.get_schema(sid)
        assert store.versions("s") == [SubjectVersion("s", 1, sid)]
        assert (store.get_config(None), store.get_config("s")) == ("FULL", "NONE")
        assert not (tmp_path / "registry.json.tmp").exists()
    finally:
        store.close()


def test_ids_are_never_reused(tmp_path: Path) -> None:
    store = FileSchemaStore(tmp_path)
    first = store.allocate_id()
    store.put_schema(StoredSchema(first, '"int"', "a"))
    store.delete_schema(first)
    store.close()
    store = FileSchemaStore(tmp_path)
    try:
        assert store.get_schema(first) is None
        assert store.allocate_id() == first + 1
    finally:
        store.close()


def test_failed_transaction_rolls_back_and_writes_nothing(tmp_path: Path) -> None:
    store = FileSchemaStore(tmp_path)
    try:
        store.put_version(SubjectVersion("s", 1, 7))
        before = (tmp_path / "registry.json").read_bytes()
        with pytest.raises(RuntimeError), store.transaction():
            store.put_version(SubjectVersion("s", 2, 8))
            store.put_config("s", "FULL")
            raise RuntimeError("abort")
        assert store.versions("s") == [SubjectVersion("s", 1, 7)]
        assert store.get_config("s") is None
        assert (tmp_path / "registry.json").read_bytes() == before
    finally:
        store.close()


def test_put_schema_requires_allocated_id(tmp_path: Path) -> None:
    store = FileSchemaStore(tmp_path)
    try:
        with pytest.raises(StoreError, match="not allocated"):
            store.put_schema(StoredSchema(5, '"int"', "x"))
    finally:
        store.close()


def test_one_process_per_directory(tmp_path: Path) -> None:
    store = FileSchemaStore(tmp_path)
    try:
        with pytest.raises(StoreError, match="in use"):
            FileSchemaStore(tmp_path)
    finally:
        store.close()


def test_corrupt_state_is_reported(tmp_path: Path) -> None:
    (tmp_path / "registry.json").write_text("{not json")
    with pytest.raises(StoreError, match="corrupt"):
        FileSchemaStore(tmp_path)
    (tmp_path / "registry.json").write_text(json.dumps({"format": 99}))
    with pytest.raises(StoreError, match="expected format 1, found 99"):
        FileSchemaStore(tmp_path)


def test_leftover_temp_file_is_discarded(tmp_path: Path) -> None:
    FileSchemaStore(tmp_path).close()
    (tmp_path / "registry.json.tmp").write_text("half a write")
    store = FileSchemaStore(tmp_path)
    store.close()
    assert not (tmp_path / "registry.json.tmp").exists()
