"""The registry's rules, independent of HTTP: what register, lookup, delete and config mean.

Each public method is one Confluent REST operation (``app.py`` maps routes onto them) and runs
under one lock and, if it writes, one store transaction — so a request either happens entirely
or not at all, and concurrent requests see each other whole.

Rules kept from Confluent's registry:

* The same schema (see :mod:`sluice.schemas.schema_type` for "same": the type's canonical form)
  registered again under a subject where it is live returns its id without a compatibility
  check; under another subject it gets a new version that shares the id.
* Three schema types: AVRO, JSON and PROTOBUF (:mod:`sluice.schemas.schema_parser`), each
  with its own compatibility rules; a schema checked against a version of another type is
  incompatible with it. Schema references are not supported yet (42201).
* Versions count up from 1 per subject and are not reused while any record of the subject is
  left; after a permanent delete of every version the next one is 1 again.
* A soft delete hides a version from listings and from compatibility checks, but its schema
  stays readable by id (consumers still hold data written with it). A permanent delete needs a
  soft delete first; when no version anywhere refers to a schema any more the schema is
  removed, and its id is never given to another schema.
* The compatibility level is the subject's own, else the global one, else ``default_level``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from sluice.schemas.avro_schema import AVRO
from sluice.schemas.compatibility import (
    DEFAULT_LEVEL,
    CompatibilityLevel,
    ExistingSchema,
    check_compatibility,
)
from sluice.schemas.errors import (
    IncompatibleSchemaError,
    InvalidSchemaError,
    InvalidVersionError,
    SchemaNotFoundError,
    SubjectConfigNotFoundError,
    SubjectNotFoundError,
    SubjectNotSoftDeletedError,
    SubjectSoftDeletedError,
    VersionNotFoundError,
    VersionNotSoftDeletedError,
    VersionSoftDeletedError,
)
from sluice.schemas.schema_parser import parse_schema
from sluice.schemas.schema_type import ParsedSchema
from sluice.schemas.store import SchemaStore, StoredSchema, SubjectVersion

LATEST = "latest"
MAX_VERSION = 2**31 - 1


@dataclass(frozen=True)
class VersionInfo:
    """A subject version with its schema: the body of ``GET /subjects/{s}/versions/{v}``."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = AVRO


def parse_version(spec: str | int) -> int | None:
    """``"latest"`` or ``-1`` → ``None``; ``"3"`` → 3; anything else raises 42202."""
    text = str(spec).strip()
    if text.lower() == LATEST or text == "-1":
        return None
    try:
        version = int(text)
    except ValueError:
        version = 0
    if not 1 <= version <= MAX_VERSION:
        raise InvalidVersionError(
            f"The specified version '{text}' is not a valid version id. Allowed values are "
            f'between [1, 2^31-1] and the string "{LATEST}"'
        )
    return version


class Registry:
    """Confluent-compatible registry operations over a :class:`SchemaStore`. Thread-safe."""

    def __init__(
        self, store: SchemaStore, default_level: CompatibilityLevel = DEFAULT_LEVEL
    ) -> None:
        self.store = store
        self.default_level = default_level
        self._lock = threading.RLock()
        # Parsed schemas by id; ids are never reused, so an entry can only go stale by removal.
        self._parsed: dict[int, ParsedSchema] = {}

    # -- helpers -----------------------------------------------------------------------------

    def _parsed_by_id(self, schema_id: int) -> ParsedSchema:
        parsed = self._parsed.get(schema_id)
        if parsed is None:
            stored = self.store.get_schema(schema_id)
            if stored is None:
                raise SchemaNotFoundError(f"Schema {schema_id} not found")
            parsed = self._parsed[schema_id] = parse_schema(stored.text, stored.schema_type)
        return parsed

    def _records(self, subject: str, *, include_deleted: bool) -> list[SubjectVersion]:
        """The subject's versions; 40401 if it has none (none live, unless include_deleted)."""
        records = self.store.versions(subject)
        if not include_deleted:
            records = [r for r in records if not r.deleted]
        if not records:
            raise SubjectNotFoundError(f"Subject '{subject}' not found.")
        return records

    def _find(self, subject: str, spec: str | int, *, include_deleted: bool) -> SubjectVersion:
        version = parse_version(spec)
        records = self._records(subject, include_deleted=include_deleted)
        if version is None:
            return records[-1]
        for record in records:
            if record.version == version:
                return record
        raise VersionNotFoundError(f"Version {version} not found.")

    def _info(self, record: SubjectVersion, fmt: str | None = None) -> VersionInfo:
        stored = self.store.get_schema(record.schema_id)
        if stored is None:  # a version never outlives its schema; the store is damaged
            raise SchemaNotFoundError(f"Schema {record.schema_id} not found")
        text = stored.text if fmt is None else self._parsed_by_id(record.schema_id).formatted(fmt)
        return VersionInfo(
            record.subject, record.version, record.schema_id, text, stored.schema_type
        )

    def _level(self, subject: str) -> CompatibilityLevel:
        level = self.store.get_config(subject) or self.store.get_config(None)
        return CompatibilityLevel.parse(level) if level else self.default_level

    def _existing(self, records: list[SubjectVersion]) -> list[ExistingSchema]:
        return [ExistingSchema(r.version, self._parsed_by_id(r.schema_id)) for r in records]

    def _collect_garbage(self, schema_id: int) -> None:
        if not any(r.schema_id == schema_id for r in self.store.all_versions()):
            self.store.delete_schema(schema_id)
            self._parsed.pop(schema_id, None)

    @staticmethod
    def _parse_request(text: str, schema_type: object, references: object) -> ParsedSchema:
        if references:
            raise InvalidSchemaError("Invalid schema: schema references are not supported")
        return parse_schema(text, schema_type)

    # -- schemas -----------------------------------------------------------------------------

    def register(
        self,
        subject: str,
        text: str,
        schema_type: str | None = AVRO,
        references: object = None,
    ) -> int:
        """Register ``text`` under ``subject``; return its id. 42201, 409 on failure."""
        parsed = self._parse_request(text, schema_type, references)
        with self._lock, self.store.transaction():
            records = self.store.versions(subject)
            live = [r for r in records if not r.deleted]
            for record in reversed(live):
                if self._parsed_by_id(record.schema_id).fingerprint == parsed.fingerprint:
                    return record.schema_id
            level = self._level(subject)
            reasons = check_compatibility(parsed, self._existing(live), level)
            if reasons:
                raise IncompatibleSchemaError(
                    "Schema being registered is incompatible with an earlier schema for subject "
                    f'"{subject}", details: [{", ".join(reasons)}]'
                )
            stored = self.store.find_schema(parsed.fingerprint)
            if stored is None:
                stored = StoredSchema(
                    self.store.allocate_id(), parsed.text, parsed.fingerprint, parsed.schema_type
                )
                self.store.put_schema(stored)
                self._parsed[stored.id] = parsed
            version = max((r.version for r in records), default=0) + 1
            self.store.put_version(SubjectVersion(subject, version, stored.id))
            return stored.id

    def lookup(
        self,
        subject: str,
        text: str,
        schema_type: str | None = AVRO,
        references: object = None,
        *,
        include_deleted: bool = False,
    ) -> VersionInfo:
        """The version of ``subject`` holding this schema. 40401, 40403, 42201."""
        with self._lock:
            records = self._records(subject, include_deleted=include_deleted)
            parsed = self._parse_request(text, schema_type, references)
            for record in reversed(records):
                if self._parsed_by_id(record.schema_id).fingerprint == parsed.fingerprint:
                    return self._info(record)
            raise SchemaNotFoundError("Schema not found")

    def schema_by_id(self, schema_id: int, *, fmt: str | None = None) -> StoredSchema:
        """The schema under ``schema_id`` (soft-deleted versions keep it readable). 40403.

        ``fmt`` is the request's ``format``: ``serialized`` gives a Protobuf schema as the
        base64 ``FileDescriptorProto`` (what confluent-kafka's deserializer asks for); other
        values, and other types, give the stored text."""
        with self._lock:
            stored = self.store.get_schema(schema_id)
            if stored is None:
                raise SchemaNotFoundError(f"Schema {schema_id} not found")
            if fmt is None:
                return stored
            text = self._parsed_by_id(schema_id).formatted(fmt)
            return StoredSchema(stored.id, text, stored.fingerprint, stored.schema_type)

    def versions_of_schema(
        self, schema_id: int, *, include_deleted: bool = False
    ) -> list[tuple[str, int]]:
        """``(subject, version)`` pairs that use ``schema_id``. 40403 if the id is unknown."""
        with self._lock:
            self.schema_by_id(schema_id)
            return [
                (r.subject, r.version)
                for r in self.store.all_versions()
                if r.schema_id == schema_id and (include_deleted or not r.deleted)
            ]

    # -- subjects and versions ---------------------------------------------------------------

    def subjects(
        self, *, include_deleted: bool = False, deleted_only: bool = False, prefix: str = ""
    ) -> list[str]:
        """Subject names with a live version (or any version / only soft-deleted ones)."""
        with self._lock:
            result = []
            for subject in self.store.subjects():
                if not subject.startswith(prefix):
                    continue
                live = any(not r.deleted for r in self.store.versions(subject))
                if (deleted_only and not live) or (not deleted_only and (live or include_deleted)):
                    result.append(subject)
            return result

    def versions(
        self, subject: str, *, include_deleted: bool = False, deleted_only: bool = False
    ) -> list[int]:
        """Version numbers of ``subject``. 40401 if there are none to show."""
        with self._lock:
            records = self._records(subject, include_deleted=include_deleted or deleted_only)
            if deleted_only:
                return [r.version for r in records if r.deleted]
            return [r.version for r in records]

    def get_version(
        self,
        subject: str,
        spec: str | int,
        *,
        include_deleted: bool = False,
        fmt: str | None = None,
    ) -> VersionInfo:
        """Version ``spec`` (a number or ``latest``) of ``subject``. 40401, 40402, 42202.

        ``fmt`` is the request's ``format``, as for :meth:`schema_by_id`."""
        with self._lock:
            record = self._find(subject, spec, include_deleted=include_deleted)
            return self._info(record, fmt)

    def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        """Soft- or permanently delete every version; return the versions deleted."""
        with self._lock, self.store.transaction():
            records = self.store.versions(subject)
            if not records:
                raise SubjectNotFoundError(f"Subject '{subject}' not found.")
            live = [r for r in records if not r.deleted]
            if not permanent:
                if not live:
                    raise SubjectSoftDeletedError(
                        f"Subject '{subject}' was soft deleted. Set permanent=true to delete "
                        "permanently"
                    )
                for r in live:
                    self.store.put_version(SubjectVersion(r.subject, r.version, r.schema_id, True))
                return [r.version for r in live]
            if live:
                raise SubjectNotSoftDeletedError(
                    f"Subject '{subject}' was not deleted first before being permanently deleted"
                )
            for r in records:
                self.store.remove_version(subject, r.version)
            self.store.delete_config(subject)
            for schema_id in {r.schema_id for r in records}:
                self._collect_garbage(schema_id)
            return [r.version for r in records]

    def delete_version(self, subject: str, spec: str | int, *, permanent: bool = False) -> int:
        """Soft- or permanently delete one version; return its number."""
        with self._lock, self.store.transaction():
            version = parse_version(spec)
            if version is None:  # "latest": the newest live one (or newest of all, permanent)
                record = self._find(subject, LATEST, include_deleted=permanent)
            else:
                record = self._find(subject, version, include_deleted=True)
            if not permanent:
                if record.deleted:
                    raise VersionSoftDeletedError(
                        f"Subject '{subject}' Version {record.version} was soft deleted. "
                        "Set permanent=true to delete permanently"
                    )
                self.store.put_version(
                    SubjectVersion(subject, record.version, record.schema_id, True)
                )
                return record.version
            if not record.deleted:
                raise VersionNotSoftDeletedError(
                    f"Subject '{subject}' Version {record.version} was not deleted first before "
                    "being permanently deleted"
                )
            self.store.remove_version(subject, record.version)
            self._collect_garbage(record.schema_id)
            return record.version

    # -- compatibility -----------------------------------------------------------------------

    def test_compatibility(
        self,
        subject: str,
        spec: str | int | None,
        text: str,
        schema_type: str | None = AVRO,
        references: object = None,
    ) -> list[str]:
        """Reasons ``text`` may not be registered; empty means compatible.

        ``spec`` names one version (or ``latest``) to check against; ``None`` checks against
        what registration would (the latest or, for transitive levels, all live versions).
        A subject without live versions is compatible with anything (Confluent ≥ 6.1).
        """
        parsed = self._parse_request(text, schema_type, references)
        with self._lock:
            live = [r for r in self.store.versions(subject) if not r.deleted]
            level = self._level(subject)
            if spec is None:
                targets = live
            elif parse_version(spec) is None:
                targets = live[-1:]
            else:
                targets = [self._find(subject, spec, include_deleted=False)]
            return check_compatibility(parsed, self._existing(targets), level)

    # -- config ------------------------------------------------------------------------------

    def get_config(self, subject: str | None, *, default_to_global: bool = False) -> str:
        """The level of ``subject`` (``None``: global). 40408 if the subject has none set."""
        with self._lock:
            if subject is None:
                return self.store.get_config(None) or self.default_level.value
            level = self.store.get_config(subject)
            if level is not None:
                return level
            if default_to_global:
                return self.store.get_config(None) or self.default_level.value
            raise SubjectConfigNotFoundError(
                f"Subject '{subject}' does not have subject-level compatibility configured"
            )

    def set_config(self, subject: str | None, level: object) -> str:
        """Set the level of ``subject`` (``None``: global); return it. 42203 if invalid."""
        parsed = CompatibilityLevel.parse(level)
        with self._lock, self.store.transaction():
            self.store.put_config(subject, parsed.value)
            return parsed.value

    def delete_config(self, subject: str | None) -> str:
        """Unset the level of ``subject`` (``None``: global); return the level it had."""
        with self._lock, self.store.transaction():
            previous = self.get_config(subject)
            self.store.delete_config(subject)
            return previous
