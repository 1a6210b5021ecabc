"""The registry's rules, independent of HTTP: what register, lookup, delete and config mean.

Each public method is one Confluent REST operation (``routes.py`` maps routes onto them) and runs
under one lock and, if it writes, one store transaction — so a request either happens entirely
or not at all, and concurrent requests see each other whole.

Rules kept from Confluent's registry:

* The same schema (see :mod:`sluice.schemas.schema_type` for "same": the type's canonical form)
  registered again under a subject where it is live returns its id without a compatibility
  check; under another subject it gets a new version that shares the id.
* Three schema types: AVRO, JSON and PROTOBUF (:mod:`sluice.schemas.schema_parser`), each
  with its own compatibility rules; a schema checked against a version of another type is
  incompatible with it.
* References: a schema may name ``[{name, subject, version}]``; each must be a live version
  (42201 otherwise) and is parsed with the schema (its own references first). A schema is the
  same as another when its canonical form, its references and — where the request gives them
  — its metadata and rule set are. A version that any version record references cannot be
  deleted, softly or for good (42206), until the referring versions are deleted for good.
* Metadata and rule sets are stored with the schema and served; Sluice does not execute rules.
* Modes (:mod:`sluice.schemas.mode`): READONLY refuses registrations and deletes (42205);
  IMPORT takes registrations with an explicit ``id`` (and ``version``), unchecked for
  compatibility, refusing an id that holds another schema; ids an import chose are never
  allocated again.
* Contexts (:mod:`sluice.schemas.context`): ``:.ctx:name`` is a subject of the context
  ``.ctx``, whose schema ids are its own; every rule above holds within a context.
* Versions count up from 1 per subject and are not reused while any record of the subject is
  left; after a permanent delete of every version the next one is 1 again.
* A soft delete hides a version from listings and from compatibility checks, but its schema
  stays readable by id (consumers still hold data written with it). A permanent delete needs a
  soft delete first; when no version anywhere refers to a schema any more the schema is
  removed, and its id is never given to another schema.
* The compatibility level is the subject's own, else the global one, else ``default_level``.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

from sluice.schemas.avro_schema import AVRO
from sluice.schemas.compatibility import (
    DEFAULT_LEVEL,
    CompatibilityLevel,
    ExistingSchema,
    check_compatibility,
)
from sluice.schemas.context import (
    DEFAULT_CONTEXT,
    context_of,
    normalize,
    reference_subject,
    scopes,
    split_subject,
)
from sluice.schemas.errors import (
    IncompatibleSchemaError,
    InvalidSchemaError,
    InvalidVersionError,
    OperationNotPermittedError,
    ReferenceExistsError,
    RegistryError,
    SchemaNotFoundError,
    SubjectConfigNotFoundError,
    SubjectModeNotFoundError,
    SubjectNotFoundError,
    SubjectNotSoftDeletedError,
    SubjectSoftDeletedError,
    VersionNotFoundError,
    VersionNotSoftDeletedError,
    VersionSoftDeletedError,
)
from sluice.schemas.mode import DEFAULT_MODE, Mode
from sluice.schemas.schema_parser import parse_schema
from sluice.schemas.schema_request import (
    Candidate,
    SchemaRequest,
    json_object_text,
    optional_int,
    references_of,
)
from sluice.schemas.schema_type import ParsedSchema, ResolvedReference
from sluice.schemas.store import Reference, SchemaStore, StoredSchema, SubjectVersion

LATEST = "latest"
MAX_VERSION = 2**31 - 1
# How deep references may chain (a references b references c ...): far past any real use,
# and short of Python's recursion limit.
MAX_REFERENCE_DEPTH = 64


@dataclass(frozen=True)
class VersionInfo:
    """A subject version with its schema: the body of ``GET /subjects/{s}/versions/{v}``."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = AVRO
    references: tuple[Reference, ...] = ()
    metadata: str | None = None
    rule_set: str | None = None


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
        # Parsed schemas by (context, id); ids are never reused, so an entry can only go stale
        # by removal.
        self._parsed: dict[tuple[str, int], ParsedSchema] = {}

    # -- helpers -----------------------------------------------------------------------------

    def _parsed_by_id(
        self, schema_id: int, context: str = DEFAULT_CONTEXT, depth: int = 0
    ) -> ParsedSchema:
        parsed = self._parsed.get((context, schema_id))
        if parsed is None:
            stored = self.store.get_schema(schema_id, context)
            if stored is None:
                raise SchemaNotFoundError(f"Schema {schema_id} not found")
            resolved = self._resolve(stored.references, context, depth + 1)
            parsed = parse_schema(stored.text, stored.schema_type, resolved)
            self._parsed[(context, schema_id)] = parsed
        return parsed

    def _resolve(
        self,
        references: tuple[Reference, ...],
        context: str,
        depth: int = 0,
        expanded: set[tuple[str, int]] | None = None,
    ) -> list[ResolvedReference]:
        """The schemas ``references`` name, each after its own references (deduplicated by
        name, first one kept); 42201 if one is missing or they chain too deep.

        ``expanded`` holds the ``(subject, version)`` pairs whose own references this
        resolution has listed already: each is expanded once, so references that share
        dependencies (a diamond, repeated level upon level) cost their number of versions,
        not the number of paths through them."""
        expanded = set() if expanded is None else expanded
        if references and depth > MAX_REFERENCE_DEPTH:
            raise InvalidSchemaError(
                f"Invalid schema: references nest deeper than {MAX_REFERENCE_DEPTH}"
            )
        result: list[ResolvedReference] = []
        for ref in references:
            subject = reference_subject(ref.subject, context)
            try:
                record = self._find(subject, ref.version, include_deleted=False)
            except RegistryError as e:
                raise InvalidSchemaError(
                    f"Invalid schema: reference '{ref.name}' names subject '{ref.subject}' "
                    f"version {ref.version}, which does not exist ({e.message})"
                ) from e
            ref_context = context_of(subject)
            stored = self.store.get_schema(record.schema_id, ref_context)
            if stored is None:
                raise SchemaNotFoundError(f"Schema {record.schema_id} not found")
            if (subject, record.version) not in expanded:
                expanded.add((subject, record.version))
                result += self._resolve(stored.references, ref_context, depth + 1, expanded)
            parsed = self._parsed_by_id(record.schema_id, ref_context, depth)
            result.append(ResolvedReference(ref.name, parsed))
        seen: set[str] = set()
        unique = []
        for resolved in result:
            if resolved.name not in seen:
                seen.add(resolved.name)
                unique.append(resolved)
        return unique

    def _candidate(self, request: SchemaRequest, context: str = DEFAULT_CONTEXT) -> Candidate:
        """Parse a request's schema with its references; 42201 if anything is invalid.
        References given as ``latest`` (-1) are pinned to the version they name now."""
        references = tuple(
            ref
            if ref.version > 0
            else Reference(
                ref.name,
                ref.subject,
                self._find(
                    reference_subject(ref.subject, context), LATEST, include_deleted=False
                ).version,
            )
            for ref in references_of(request.references)
        )
        parsed = parse_schema(request.text, request.schema_type, self._resolve(references, context))
        return Candidate(
            parsed,
            references,
            json_object_text(request.metadata, "metadata"),
            json_object_text(request.rule_set, "ruleSet"),
        )

    def _parse_early(self, request: SchemaRequest) -> Candidate | None:
        """The candidate of a request without references, parsed before the registry's lock
        is taken (a large Protobuf schema takes seconds, which other requests need not wait
        for); ``None`` for one with references, which are resolved under the lock."""
        return None if request.references else self._candidate(request)

    def _matches(self, record: SubjectVersion, candidate: Candidate) -> bool:
        """Whether ``record`` holds the candidate's schema: same canonical form and references,
        and the same metadata and rule set where the candidate gives them."""
        context = context_of(record.subject)
        # The parsed schema is cached; the stored record is read only when the text matches.
        if (
            self._parsed_by_id(record.schema_id, context).fingerprint
            != candidate.parsed.fingerprint
        ):
            return False
        stored = self.store.get_schema(record.schema_id, context)
        return (
            stored is not None
            and stored.references == candidate.references
            and candidate.metadata in (None, stored.metadata)
            and candidate.rule_set in (None, stored.rule_set)
        )

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
        context = context_of(record.subject)
        stored = self.store.get_schema(record.schema_id, context)
        if stored is None:  # a version never outlives its schema; the store is damaged
            raise SchemaNotFoundError(f"Schema {record.schema_id} not found")
        if fmt is None:
            text = stored.text
        else:
            text = self._parsed_by_id(record.schema_id, context).formatted(fmt)
        return VersionInfo(
            record.subject,
            record.version,
            record.schema_id,
            text,
            stored.schema_type,
            stored.references,
            stored.metadata,
            stored.rule_set,
        )

    def _level(self, subject: str) -> CompatibilityLevel:
        for scope in scopes(subject):
            level = self.store.get_config(scope)
            if level:
                return CompatibilityLevel.parse(level)
        return self.default_level

    def _mode(self, subject: str) -> Mode:
        for scope in scopes(subject):
            mode = self.store.get_mode(scope)
            if mode:
                return Mode(mode)
        return DEFAULT_MODE

    def _occupied(self, subject: str | None) -> bool:
        """Whether IMPORT would meet existing versions: any subject (global), any subject of a
        context (``:.ctx:``), or the subject's own versions."""
        if subject is None:
            return bool(self.store.subjects())
        context, name = split_subject(subject)
        if name == "" and context != DEFAULT_CONTEXT:
            return any(context_of(s) == context for s in self.store.subjects())
        return bool(self.store.versions(subject))

    def _check_deletable(self, subject: str, records: list[SubjectVersion]) -> None:
        """42205 if the subject is read-only; 42206 if any of ``records`` is referenced."""
        if self._mode(subject).read_only:
            raise OperationNotPermittedError(f"Subject {subject} is in read-only mode")
        targets = {(r.subject, r.version) for r in records}
        for referrer in self.store.all_versions():
            context = context_of(referrer.subject)
            stored = self.store.get_schema(referrer.schema_id, context)
            for ref in stored.references if stored is not None else ():
                if (reference_subject(ref.subject, context), ref.version) in targets:
                    raise ReferenceExistsError(
                        "One or more references exist to the schema "
                        f"{{magic=1,keytype=SCHEMA,subject={ref.subject},version={ref.version}}}."
                    )

    def _existing(self, records: list[SubjectVersion]) -> list[ExistingSchema]:
        return [
            ExistingSchema(r.version, self._parsed_by_id(r.schema_id, context_of(r.subject)))
            for r in records
        ]

    def _collect_garbage(self, schema_id: int, context: str) -> None:
        if not any(
            r.schema_id == schema_id and context_of(r.subject) == context
            for r in self.store.all_versions()
        ):
            self.store.delete_schema(schema_id, context)
            self._parsed.pop((context, schema_id), None)

    # -- schemas -----------------------------------------------------------------------------

    def register(
        self,
        subject: str,
        text: str | SchemaRequest,
        schema_type: str | None = AVRO,
        references: object = None,
    ) -> int:
        """Register a schema under ``subject``; return its id. 42201, 42205, 409 on failure.

        ``text`` is the schema text (with ``schema_type`` and ``references``) or a whole
        :class:`SchemaRequest` (metadata, rule set, an import's id and version)."""
        request = (
            text
            if isinstance(text, SchemaRequest)
            else SchemaRequest(text, schema_type, references)
        )
        subject = normalize(subject)
        context = context_of(subject)
        schema_id = optional_int(request.id, "id")
        version = optional_int(request.version, "version")
        parsed_early = self._parse_early(request)
        with self._lock, self.store.transaction():
            mode = self._mode(subject)
            if schema_id is not None and mode is not Mode.IMPORT:
                raise OperationNotPermittedError(f"Subject {subject} is not in import mode")
            if schema_id is None and mode is not Mode.READWRITE:
                raise OperationNotPermittedError(f"Subject {subject} is not in read-write mode")
            candidate = parsed_early or self._candidate(request, context)
            if schema_id is not None:
                return self._import(subject, candidate, schema_id, version)
            records = self.store.versions(subject)
            live = [r for r in records if not r.deleted]
            for record in reversed(live):
                if self._matches(record, candidate):
                    return record.schema_id
            next_version = max((r.version for r in records), default=0) + 1
            if version is not None and version != next_version:
                raise InvalidSchemaError(
                    f"Invalid schema: version {version} is not one more than the latest "
                    f"version {next_version - 1}"
                )
            level = self._level(subject)
            reasons = check_compatibility(candidate.parsed, self._existing(live), level)
            if reasons:
                raise IncompatibleSchemaError(
                    "Schema being registered is incompatible with an earlier schema for subject "
                    f'"{subject}", details: [{", ".join(reasons)}]'
                )
            stored = self.store.find_schema(candidate.key, context)
            if stored is None:
                stored = self._put(self.store.allocate_id(context), candidate, context)
            self.store.put_version(SubjectVersion(subject, next_version, stored.id))
            return stored.id

    def _put(self, schema_id: int, candidate: Candidate, context: str) -> StoredSchema:
        parsed = candidate.parsed
        stored = StoredSchema(
            schema_id,
            parsed.text,
            candidate.key,
            parsed.schema_type,
            candidate.references,
            candidate.metadata,
            candidate.rule_set,
        )
        self.store.put_schema(stored, context)
        self._parsed[(context, stored.id)] = parsed
        return stored

    def _import(
        self, subject: str, candidate: Candidate, schema_id: int, version: int | None
    ) -> int:
        """An IMPORT registration: ``schema_id`` (and ``version``) as given, no compatibility
        check; 42205 if the id holds another schema or the version another id."""
        context = context_of(subject)
        existing = self.store.get_schema(schema_id, context)
        if existing is not None and existing.fingerprint != candidate.key:
            raise OperationNotPermittedError(
                f"Overwrite new schema with id {schema_id} is not permitted."
            )
        records = self.store.versions(subject)
        if version is None:
            for record in records:
                if record.schema_id == schema_id and not record.deleted:
                    return schema_id
            version = max((r.version for r in records), default=0) + 1
        for record in records:
            if record.version == version:
                if record.schema_id == schema_id:
                    return schema_id
                raise OperationNotPermittedError(
                    f"Overwrite new schema with version {version} of subject {subject} "
                    f"(id {record.schema_id}) is not permitted."
                )
        if existing is None:
            self.store.reserve_id(schema_id, context)
            self._put(schema_id, candidate, context)
        self.store.put_version(SubjectVersion(subject, version, schema_id))
        return schema_id

    def lookup(
        self,
        subject: str,
        text: str | SchemaRequest,
        schema_type: str | None = AVRO,
        references: object = None,
        *,
        include_deleted: bool = False,
    ) -> VersionInfo:
        """The version of ``subject`` holding this schema. 40401, 40403, 42201."""
        request = (
            text
            if isinstance(text, SchemaRequest)
            else SchemaRequest(text, schema_type, references)
        )
        subject = normalize(subject)
        parsed_early = self._parse_early(request)
        with self._lock:
            records = self._records(subject, include_deleted=include_deleted)
            candidate = parsed_early or self._candidate(request, context_of(subject))
            for record in reversed(records):
                if self._matches(record, candidate):
                    return self._info(record)
            raise SchemaNotFoundError("Schema not found")

    def schema_by_id(
        self, schema_id: int, *, fmt: str | None = None, subject: str | None = None
    ) -> StoredSchema:
        """The schema under ``schema_id`` (soft-deleted versions keep it readable). 40403.

        ``fmt`` is the request's ``format``: ``serialized`` gives a Protobuf schema as the
        base64 ``FileDescriptorProto`` (what confluent-kafka's deserializer asks for); other
        values, and other types, give the stored text. ``subject`` (the request's) names the
        context whose id it is; the default context without one."""
        context = context_of(subject) if subject else DEFAULT_CONTEXT
        with self._lock:
            stored = self.store.get_schema(schema_id, context)
            if stored is None:
                raise SchemaNotFoundError(f"Schema {schema_id} not found")
            if fmt is None:
                return stored
            text = self._parsed_by_id(schema_id, context).formatted(fmt)
            return StoredSchema(
                stored.id,
                text,
                stored.fingerprint,
                stored.schema_type,
                stored.references,
                stored.metadata,
                stored.rule_set,
            )

    def versions_of_schema(
        self, schema_id: int, *, include_deleted: bool = False, subject: str | None = None
    ) -> list[tuple[str, int]]:
        """``(subject, version)`` pairs that use ``schema_id`` (of ``subject``'s context).
        40403 if the id is unknown."""
        context = context_of(subject) if subject else DEFAULT_CONTEXT
        with self._lock:
            self.schema_by_id(schema_id, subject=subject)
            return [
                (r.subject, r.version)
                for r in self.store.all_versions()
                if r.schema_id == schema_id
                and context_of(r.subject) == context
                and (include_deleted or not r.deleted)
            ]

    def referenced_by(
        self, subject: str, spec: str | int, *, include_deleted: bool = False
    ) -> list[int]:
        """Ids of the schemas whose versions reference this version, ascending. 40401, 40402."""
        subject = normalize(subject)
        with self._lock:
            record = self._find(subject, spec, include_deleted=True)
            ids = set()
            for referrer in self.store.all_versions():
                if referrer.deleted and not include_deleted:
                    continue
                context = context_of(referrer.subject)
                stored = self.store.get_schema(referrer.schema_id, context)
                if stored is not None and any(
                    (reference_subject(r.subject, context), r.version) == (subject, record.version)
                    for r in stored.references
                ):
                    ids.add(stored.id)
            return sorted(ids)

    def list_schemas(
        self,
        *,
        prefix: str = "",
        latest_only: bool = False,
        include_deleted: bool = False,
        offset: int = 0,
        limit: int = -1,
    ) -> list[VersionInfo]:
        """``GET /schemas``: every version of every subject starting with ``prefix`` (the
        latest of each only, soft-deleted ones too), by subject then version, paged."""
        with self._lock:
            result = []
            for subject in self.store.subjects():
                if not subject.startswith(prefix):
                    continue
                records = [
                    r for r in self.store.versions(subject) if include_deleted or not r.deleted
                ]
                for record in records[-1:] if latest_only else records:
                    result.append(self._info(record))
            result = result[max(offset, 0) :]
            return result if limit < 0 else result[:limit]

    def latest_with_metadata(
        self,
        subject: str,
        properties: dict[str, str],
        *,
        include_deleted: bool = False,
        fmt: str | None = None,
    ) -> VersionInfo:
        """The newest version of ``subject`` whose metadata ``properties`` hold every pair
        given. 40401; 40403 if none does."""
        subject = normalize(subject)
        with self._lock:
            for record in reversed(self._records(subject, include_deleted=include_deleted)):
                stored = self.store.get_schema(record.schema_id, context_of(record.subject))
                metadata: dict[str, Any] = (
                    json.loads(stored.metadata) if stored and stored.metadata else {}
                )
                held = metadata.get("properties") or {}
                if isinstance(held, dict) and all(held.get(k) == v for k, v in properties.items()):
                    return self._info(record, fmt)
            raise SchemaNotFoundError(
                f"No version of subject '{subject}' has the metadata {properties}"
            )

    def contexts(self) -> list[str]:
        """The default context and every context with a subject, sorted (``.`` first)."""
        with self._lock:
            found = {context_of(subject) for subject in self.store.subjects()}
            return sorted(found | {DEFAULT_CONTEXT})

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
        subject = normalize(subject)
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
        subject = normalize(subject)
        with self._lock:
            record = self._find(subject, spec, include_deleted=include_deleted)
            return self._info(record, fmt)

    def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        """Soft- or permanently delete every version; return the versions deleted."""
        subject = normalize(subject)
        with self._lock, self.store.transaction():
            records = self.store.versions(subject)
            if not records:
                raise SubjectNotFoundError(f"Subject '{subject}' not found.")
            live = [r for r in records if not r.deleted]
            self._check_deletable(subject, records)
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
                self._collect_garbage(schema_id, context_of(subject))
            return [r.version for r in records]

    def delete_version(self, subject: str, spec: str | int, *, permanent: bool = False) -> int:
        """Soft- or permanently delete one version; return its number."""
        subject = normalize(subject)
        with self._lock, self.store.transaction():
            version = parse_version(spec)
            if version is None:  # "latest": the newest live one (or newest of all, permanent)
                record = self._find(subject, LATEST, include_deleted=permanent)
            else:
                record = self._find(subject, version, include_deleted=True)
            self._check_deletable(subject, [record])
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
            self._collect_garbage(record.schema_id, context_of(subject))
            return record.version

    # -- compatibility -----------------------------------------------------------------------

    def test_compatibility(
        self,
        subject: str,
        spec: str | int | None,
        text: str | SchemaRequest,
        schema_type: str | None = AVRO,
        references: object = None,
    ) -> list[str]:
        """Reasons ``text`` may not be registered; empty means compatible.

        ``spec`` names one version (or ``latest``) to check against; ``None`` checks against
        what registration would (the latest or, for transitive levels, all live versions).
        A subject without live versions is compatible with anything (Confluent ≥ 6.1).
        """
        subject = normalize(subject)
        request = (
            text
            if isinstance(text, SchemaRequest)
            else SchemaRequest(text, schema_type, references)
        )
        parsed_early = self._parse_early(request)
        with self._lock:
            parsed = (parsed_early or self._candidate(request, context_of(subject))).parsed
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
        subject = normalize(subject) if subject is not None else None
        with self._lock:
            if subject is None:
                return self.store.get_config(None) or self.default_level.value
            level = self.store.get_config(subject)
            if level is not None:
                return level
            if default_to_global:
                return self._level(subject).value
            raise SubjectConfigNotFoundError(
                f"Subject '{subject}' does not have subject-level compatibility configured"
            )

    def set_config(self, subject: str | None, level: object) -> str:
        """Set the level of ``subject`` (``None``: global); return it. 42203 if invalid."""
        subject = normalize(subject) if subject is not None else None
        parsed = CompatibilityLevel.parse(level)
        with self._lock, self.store.transaction():
            self.store.put_config(subject, parsed.value)
            return parsed.value

    def delete_config(self, subject: str | None) -> str:
        """Unset the level of ``subject`` (``None``: global); return the level it had."""
        subject = normalize(subject) if subject is not None else None
        with self._lock, self.store.transaction():
            previous = self.get_config(subject)
            self.store.delete_config(subject)
            return previous

    # -- modes -------------------------------------------------------------------------------

    def get_mode(self, subject: str | None, *, default_to_global: bool = False) -> str:
        """The mode of ``subject`` (``None``: global). 40409 if the subject has none set."""
        subject = normalize(subject) if subject is not None else None
        with self._lock:
            if subject is None:
                return self.store.get_mode(None) or DEFAULT_MODE.value
            mode = self.store.get_mode(subject)
            if mode is not None:
                return mode
            if default_to_global:
                return self._mode(subject).value
            raise SubjectModeNotFoundError(
                f"Subject '{subject}' does not have subject-level mode configured"
            )

    def set_mode(self, subject: str | None, mode: object, *, force: bool = False) -> str:
        """Set the mode of ``subject`` (``None``: global); return it. 42204 if invalid; 42205
        for IMPORT over existing subjects without ``force``."""
        subject = normalize(subject) if subject is not None else None
        parsed = Mode.parse(mode)
        with self._lock, self.store.transaction():
            current = self._mode(subject) if subject is not None else self.get_mode(None)
            importing = parsed is Mode.IMPORT and current != Mode.IMPORT and not force
            if importing and self._occupied(subject):
                raise OperationNotPermittedError("Cannot import since found existing subjects")
            self.store.put_mode(subject, parsed.value)
            return parsed.value

    def delete_mode(self, subject: str | None) -> str:
        """Unset the mode of ``subject`` (``None``: global); return the mode it had."""
        subject = normalize(subject) if subject is not None else None
        with self._lock, self.store.transaction():
            previous = self.get_mode(subject)
            self.store.delete_mode(subject)
            return previous
