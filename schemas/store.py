"""The storage contract of the registry: a small abstract class and the records it holds.

A store keeps five things, and nothing about HTTP or compatibility:

* **schemas** by id — ``StoredSchema(id, text, fingerprint, schema_type, references,
  metadata, rule_set)``, immutable once written. Ids come from :meth:`SchemaStore.allocate_id`
  (or an import, :meth:`SchemaStore.reserve_id`) and are **never handed out twice**, not even
  after the schema that had one is permanently deleted (readers may still hold bytes
  that carry the old id; a new schema under that id would decode them wrongly).
* **subject versions** — ``SubjectVersion(subject, version, schema_id, deleted)``; a soft delete
  sets ``deleted``, a permanent delete removes the record. ``schema_id`` is an id of the
  subject's context.
* **compatibility config** — the global level (``subject=None``) and per-subject levels.
* **modes** — the global mode (``subject=None``) and per-subject modes.
* the id counter itself, and the ids an import chose (:meth:`SchemaStore.reserve_id`).

Schemas, ids and counters are kept per context (:mod:`sluice.schemas.context`); subjects,
configs and modes are keyed by qualified subject names and need no context of their own.

Lifecycle: construct (opens or creates the backing data), use, :meth:`close`. Mutations made
inside ``with store.transaction():`` become durable together when the outermost block exits,
or not at all if it raises; a mutation outside any block is its own transaction. Reads inside
a transaction see its own writes.

Thread safety: stores are **not** thread-safe; the :class:`~sluice.schemas.registry.Registry` holds
one lock around every call. A store shared between processes (the ZooKeeper store)
must make each transaction atomic on its own backend (e.g. a kazoo transaction conditional on
znode versions, ids from a sequence node).

Implementations: :class:`sluice.schemas.file_store.FileSchemaStore` (standalone mode) and
:class:`sluice.schemas.zk_store.ZooKeeperSchemaStore` (cluster mode).
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from sluice.schemas.context import DEFAULT_CONTEXT


@dataclass(frozen=True)
class Reference:
    """A schema reference: the text of ``subject`` version ``version`` is known to the
    referring schema as ``name`` (an Avro type's full name, a JSON ``$ref``, a ``.proto``
    import path)."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class StoredSchema:
    """A schema under its id. ``text`` is what ``GET /schemas/ids/{id}`` returns.

    ``metadata`` and ``rule_set`` are the request's ``metadata`` and ``ruleSet`` as compact
    JSON text (``None`` when absent): stored and served, never interpreted. With
    ``references`` they are part of the schema's identity (``fingerprint``)."""

    id: int
    text: str
    fingerprint: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()
    metadata: str | None = None
    rule_set: str | None = None


@dataclass(frozen=True)
class SubjectVersion:
    """Version ``version`` of ``subject`` points at schema ``schema_id``."""

    subject: str
    version: int
    schema_id: int
    deleted: bool = False


class SchemaStore(abc.ABC):
    """Durable storage for schemas, subject versions and compatibility config."""

    @abc.abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """A block whose mutations are persisted together on exit, or rolled back on error.

        Blocks nest; only the outermost one persists. Raises
        :class:`~sluice.schemas.errors.StoreError`
        if persisting fails, after restoring the state from before the block.
        """

    # -- ids and schemas ---------------------------------------------------------------------

    # Every schema call takes the context (:mod:`sluice.schemas.context`) whose id space it
    # works in; the default context is the store's original one.

    @abc.abstractmethod
    def allocate_id(self, context: str = DEFAULT_CONTEXT) -> int:
        """A schema id greater than every id this store ever returned in ``context`` (ids
        start at 1)."""

    @abc.abstractmethod
    def reserve_id(self, schema_id: int, context: str = DEFAULT_CONTEXT) -> None:
        """Mark ``schema_id`` (chosen by an import) as used: :meth:`allocate_id` never returns
        it afterwards, and :meth:`put_schema` accepts it."""

    @abc.abstractmethod
    def put_schema(self, schema: StoredSchema, context: str = DEFAULT_CONTEXT) -> None:
        """Store ``schema`` under ``schema.id``; the id must come from :meth:`allocate_id` or
        :meth:`reserve_id`."""

    @abc.abstractmethod
    def get_schema(self, schema_id: int, context: str = DEFAULT_CONTEXT) -> StoredSchema | None:
        """The schema stored under ``schema_id``, or ``None``."""

    @abc.abstractmethod
    def find_schema(self, fingerprint: str, context: str = DEFAULT_CONTEXT) -> StoredSchema | None:
        """The stored schema with this fingerprint, or ``None``."""

    @abc.abstractmethod
    def delete_schema(self, schema_id: int, context: str = DEFAULT_CONTEXT) -> None:
        """Forget the schema under ``schema_id`` (its id stays used). Missing ids are ignored."""

    # -- subjects and versions ---------------------------------------------------------------

    @abc.abstractmethod
    def subjects(self) -> list[str]:
        """Every subject with at least one version record (soft-deleted ones included), sorted."""

    @abc.abstractmethod
    def versions(self, subject: str) -> list[SubjectVersion]:
        """The version records of ``subject``, soft-deleted included, by ascending version."""

    @abc.abstractmethod
    def put_version(self, version: SubjectVersion) -> None:
        """Insert or replace the record for ``(version.subject, version.version)``."""

    @abc.abstractmethod
    def remove_version(self, subject: str, version: int) -> None:
        """Remove the record for ``(subject, version)`` for good. Missing records are ignored."""

    def all_versions(self) -> Iterator[SubjectVersion]:
        """Every version record of every subject (a default built on the two reads above)."""
        for subject in self.subjects():
            yield from self.versions(subject)

    # -- compatibility config ----------------------------------------------------------------

    @abc.abstractmethod
    def get_config(self, subject: str | None) -> str | None:
        """The level set for ``subject`` (``None``: the global level), or ``None`` if unset."""

    @abc.abstractmethod
    def put_config(self, subject: str | None, level: str) -> None:
        """Set the level for ``subject`` (``None``: the global level)."""

    @abc.abstractmethod
    def delete_config(self, subject: str | None) -> None:
        """Unset the level for ``subject`` (``None``: the global level)."""

    # -- modes -------------------------------------------------------------------------------

    @abc.abstractmethod
    def get_mode(self, subject: str | None) -> str | None:
        """The mode set for ``subject`` (``None``: the global mode), or ``None`` if unset."""

    @abc.abstractmethod
    def put_mode(self, subject: str | None, mode: str) -> None:
        """Set the mode of ``subject`` (``None``: the global mode)."""

    @abc.abstractmethod
    def delete_mode(self, subject: str | None) -> None:
        """Unset the mode of ``subject`` (``None``: the global mode)."""

    # -- lifecycle ---------------------------------------------------------------------------

    @abc.abstractmethod
    def close(self) -> None:
        """Release the backing resources; the store is unusable afterwards. Idempotent."""


def schema_payload(schema: StoredSchema) -> dict[str, object]:
    """The JSON object both stores keep for ``schema`` (its id is the key, not a field):
    ``{"schema", "schemaType", "fingerprint"}``, with ``"references"``, ``"metadata"`` and
    ``"ruleSet"`` only when set, so a schema without them is stored as before they existed."""
    payload: dict[str, object] = {
        "schema": schema.text,
        "schemaType": schema.schema_type,
        "fingerprint": schema.fingerprint,
    }
    if schema.references:
        payload["references"] = [r.to_json() for r in schema.references]
    if schema.metadata is not None:
        payload["metadata"] = schema.metadata
    if schema.rule_set is not None:
        payload["ruleSet"] = schema.rule_set
    return payload


def schema_from_payload(schema_id: int, payload: dict[str, Any]) -> StoredSchema:
    """The schema :func:`schema_payload` wrote under ``schema_id``."""
    references = tuple(
        Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
        for r in payload.get("references", ())
    )
    return StoredSchema(
        schema_id,
        payload["schema"],
        payload["fingerprint"],
        payload["schemaType"],
        references,
        payload.get("metadata"),
        payload.get("ruleSet"),
    )
