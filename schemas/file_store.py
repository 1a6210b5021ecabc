"""The standalone registry's store: one JSON document in the data directory.

Layout of ``<schema.registry.data.dir>/``::

    registry.json        the whole state, rewritten on every committed transaction
    registry.json.tmp    a write in progress (deleted at open: it never became the state)
    .lock                fcntl lock held by the one process that owns the directory

``registry.json`` (``format`` 1)::

    {
      "format": 1,
      "next_id": 4,                         # next id allocate_id() returns; only grows
      "schemas": {"1": {"schema": "<compact JSON text>", "schemaType": "AVRO",
                        "fingerprint": "<sha256 hex>"}},
      "subjects": {"orders-value": [{"version": 1, "id": 1, "deleted": false}]},
      "config": {"global": "BACKWARD" | null, "subjects": {"orders-value": "FULL"}},
      "mode": {"global": "READWRITE" | null, "subjects": {"orders-value": "IMPORT"}},
      "imported_ids": [7],                  # ids an import chose (also below next_id)
      "contexts": {".payments": {"next_id": 2, "schemas": {...}, "imported_ids": []}}
    }

The top-level ``next_id``, ``schemas`` and ``imported_ids`` are the default context's; every
other context (:mod:`sluice.schemas.context`) has the same three under ``contexts``, created
by its first allocation or import.

A schema entry carries ``"references"`` (``[{"name", "subject", "version"}]``),
``"metadata"`` and ``"ruleSet"`` (compact JSON text) only when it has them; ``mode`` and
``imported_ids`` and ``contexts`` are absent from files written before they existed and read as
empty.

Commit = write the new document to ``registry.json.tmp``, ``fsync`` it, ``os.replace`` it over
``registry.json``, ``fsync`` the directory. A crash at any point leaves either the old or the new
document, never a mix. A registry writes rarely (a few schemas per topic), so rewriting the
whole document is cheaper to reason about than a log, and keeps the file human-readable.

Not thread-safe (see :class:`~sluice.schemas.store.SchemaStore`); one process per directory,
enforced
by the lock file.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sluice.schemas.context import DEFAULT_CONTEXT
from sluice.schemas.errors import StoreError
from sluice.schemas.store import (
    SchemaStore,
    StoredSchema,
    SubjectVersion,
    schema_from_payload,
    schema_payload,
)

FORMAT = 1
STATE_FILE = "registry.json"
LOCK_FILE = ".lock"


class FileSchemaStore(SchemaStore):
    """A :class:`SchemaStore` kept in ``<data_dir>/registry.json``."""

    def __init__(self, data_dir: str | Path) -> None:
        self.data_dir = Path(data_dir)
        self.path = self.data_dir / STATE_FILE
        self._tmp_path = self.data_dir / (STATE_FILE + ".tmp")
        self._depth = 0
        self._dirty = False
        self._snapshot: dict[str, Any] | None = None
        self._lock_fd: int | None = None
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self._lock_fd = os.open(self.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            self.close()
            raise StoreError(
                f"data dir {self.data_dir} is in use by another registry process"
            ) from e
        except OSError as e:
            self.close()
            raise StoreError(f"cannot open data dir {self.data_dir}: {e}") from e
        try:
            self._state = self._load()
        except BaseException:
            self.close()
            raise

    # -- persistence -------------------------------------------------------------------------

    def _load(self) -> dict[str, Any]:
        with contextlib.suppress(FileNotFoundError):
            self._tmp_path.unlink()
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {
                "format": FORMAT,
                "next_id": 1,
                "schemas": {},
                "subjects": {},
                "config": {"global": None, "subjects": {}},
                "mode": {"global": None, "subjects": {}},
                "imported_ids": [],
                "contexts": {},
            }
        except OSError as e:
            raise StoreError(f"cannot read {self.path}: {e}") from e
        try:
            state = json.loads(raw)
        except json.JSONDecodeError as e:
            raise StoreError(f"corrupt {self.path}: expected JSON, found {e}") from e
        found = state.get("format") if isinstance(state, dict) else None
        if found != FORMAT:
            raise StoreError(f"{self.path}: expected format {FORMAT}, found {found!r}")
        highest = max((int(i) for i in state["schemas"]), default=0)
        if state["next_id"] <= highest:
            raise StoreError(
                f"{self.path}: next_id must exceed every stored id: expected > {highest}, "
                f"found {state['next_id']}"
            )
        state.setdefault("mode", {"global": None, "subjects": {}})
        state.setdefault("imported_ids", [])
        state.setdefault("contexts", {})
        return state  # type: ignore[no-any-return]

    def _persist(self) -> None:
        data = json.dumps(self._state, indent=1, sort_keys=True, ensure_ascii=False)
        with open(self._tmp_path, "wb") as f:
            f.write(data.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(self._tmp_path, self.path)
        dir_fd = os.open(self.data_dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        if self._lock_fd is None:
            raise StoreError(f"store {self.data_dir} is closed")
        if self._depth == 0:
            self._snapshot = copy.deepcopy(self._state)
            self._dirty = False
        self._depth += 1
        try:
            yield
        except BaseException:
            self._depth -= 1
            if self._depth == 0:
                self._rollback()
            raise
        self._depth -= 1
        if self._depth == 0 and self._dirty:
            try:
                self._persist()
            except OSError as e:
                self._rollback()
                raise StoreError(f"cannot write {self.path}: {e}") from e
            self._snapshot = None
            self._dirty = False

    def _rollback(self) -> None:
        if self._snapshot is not None:
            self._state = self._snapshot
        self._snapshot = None
        self._dirty = False

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        return self._transaction()

    @contextlib.contextmanager
    def _mutation(self) -> Iterator[None]:
        with self._transaction():
            self._dirty = True
            yield

    # -- ids and schemas ---------------------------------------------------------------------

    def _space(self, context: str, *, create: bool = False) -> dict[str, Any]:
        """The id space of ``context``: a dict with ``next_id``, ``schemas``, ``imported_ids``
        (the state itself for the default context). ``create`` only inside a mutation."""
        if context == DEFAULT_CONTEXT:
            return self._state
        empty: dict[str, Any] = {"next_id": 1, "schemas": {}, "imported_ids": []}
        if create:
            return self._state["contexts"].setdefault(context, empty)  # type: ignore[no-any-return]
        return self._state["contexts"].get(context, empty)  # type: ignore[no-any-return]

    def allocate_id(self, context: str = DEFAULT_CONTEXT) -> int:
        with self._mutation():
            space = self._space(context, create=True)
            schema_id = int(space["next_id"])
            space["next_id"] = schema_id + 1
        return schema_id

    def reserve_id(self, schema_id: int, context: str = DEFAULT_CONTEXT) -> None:
        # An imported id at or past the counter moves the counter past it (Confluent's
        # registry does the same: after an import, new ids start above the highest).
        with self._mutation():
            space = self._space(context, create=True)
            if schema_id not in space["imported_ids"]:
                space["imported_ids"].append(schema_id)
            space["next_id"] = max(int(space["next_id"]), schema_id + 1)

    def put_schema(self, schema: StoredSchema, context: str = DEFAULT_CONTEXT) -> None:
        space = self._space(context)
        if schema.id >= space["next_id"]:
            raise StoreError(
                f"schema id {schema.id} was not allocated: expected < {space['next_id']}"
            )
        with self._mutation():
            self._space(context, create=True)["schemas"][str(schema.id)] = schema_payload(schema)

    def get_schema(self, schema_id: int, context: str = DEFAULT_CONTEXT) -> StoredSchema | None:
        entry = self._space(context)["schemas"].get(str(schema_id))
        if entry is None:
            return None
        return schema_from_payload(schema_id, entry)

    def find_schema(self, fingerprint: str, context: str = DEFAULT_CONTEXT) -> StoredSchema | None:
        # A linear scan: registries hold thousands of schemas, not millions, and the lookup
        # happens only on register/lookup, which clients cache.
        for key, entry in self._space(context)["schemas"].items():
            if entry["fingerprint"] == fingerprint:
                return schema_from_payload(int(key), entry)
        return None

    def delete_schema(self, schema_id: int, context: str = DEFAULT_CONTEXT) -> None:
        with self._mutation():
            self._space(context, create=True)["schemas"].pop(str(schema_id), None)

    # -- subjects and versions ---------------------------------------------------------------

    def subjects(self) -> list[str]:
        return sorted(s for s, versions in self._state["subjects"].items() if versions)

    def versions(self, subject: str) -> list[SubjectVersion]:
        return [
            SubjectVersion(subject, v["version"], v["id"], v["deleted"])
            for v in self._state["subjects"].get(subject, [])
        ]

    def put_version(self, version: SubjectVersion) -> None:
        with self._mutation():
            records = self._state["subjects"].setdefault(version.subject, [])
            records[:] = [r for r in records if r["version"] != version.version]
            records.append(
                {"version": version.version, "id": version.schema_id, "deleted": version.deleted}
            )
            records.sort(key=lambda r: r["version"])

    def remove_version(self, subject: str, version: int) -> None:
        with self._mutation():
            records = self._state["subjects"].get(subject, [])
            records[:] = [r for r in records if r["version"] != version]
            if not records:
                self._state["subjects"].pop(subject, None)

    # -- compatibility config ----------------------------------------------------------------

    def get_config(self, subject: str | None) -> str | None:
        config = self._state["config"]
        if subject is None:
            return config["global"]  # type: ignore[no-any-return]
        return config["subjects"].get(subject)  # type: ignore[no-any-return]

    def put_config(self, subject: str | None, level: str) -> None:
        with self._mutation():
            if subject is None:
                self._state["config"]["global"] = level
            else:
                self._state["config"]["subjects"][subject] = level

    def delete_config(self, subject: str | None) -> None:
        with self._mutation():
            if subject is None:
                self._state["config"]["global"] = None
            else:
                self._state["config"]["subjects"].pop(subject, None)

    # -- modes -------------------------------------------------------------------------------

    def get_mode(self, subject: str | None) -> str | None:
        mode = self._state["mode"]
        if subject is None:
            return mode["global"]  # type: ignore[no-any-return]
        return mode["subjects"].get(subject)  # type: ignore[no-any-return]

    def put_mode(self, subject: str | None, mode: str) -> None:
        with self._mutation():
            if subject is None:
                self._state["mode"]["global"] = mode
            else:
                self._state["mode"]["subjects"][subject] = mode

    def delete_mode(self, subject: str | None) -> None:
        with self._mutation():
            if subject is None:
                self._state["mode"]["global"] = None
            else:
                self._state["mode"]["subjects"].pop(subject, None)

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None
