"""Registered schemas by id, parsed once per process: the JSON Schema and Protobuf encoders'
(the sink's) and decoders' (the source's) view of the registry.

``SchemaDirectory.by_id(id)`` asks the registry for ``GET /schemas/ids/{id}`` (text,
``schemaType``, ``references``), fetches each reference (``GET /subjects/{s}/versions/{v}``,
with its own references, dependencies first) and parses the lot with the registry's own parser
(``sluice.schemas.schema_parser.parse_schema``): the schemas package is the one place that
parses schemas, here as in the registry. The result — the parsed schema and its resolved
references — is cached for the life of the process, so a Spark Python worker, which Spark
reuses, asks once per id. An id the registry does not know is ``UnknownSchemaIdError`` (an
error-table reason); a registry that does not answer raises ``RegistryConnectionError``.

``directory(url)`` is the process-wide directory of one registry. Thread-safe: a lock guards
the cache, and a lookup is never made twice for the same id.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from sluice.schemas.client import RegistryClient
from sluice.schemas.errors import InvalidSchemaError, SchemaNotFoundError, UnknownSchemaIdError
from sluice.schemas.schema_parser import parse_schema
from sluice.schemas.schema_type import ParsedSchema, ResolvedReference

__all__ = ["RegisteredSchema", "SchemaDirectory", "directory"]


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as registered under ``schema_id``: parsed, with the schemas it references
    (dependencies first, each under the name it is referred to by). Immutable."""

    schema_id: int
    schema: ParsedSchema
    references: tuple[ResolvedReference, ...]

    @property
    def schema_type(self) -> str:
        return self.schema.schema_type.value


class SchemaDirectory:
    """The schemas of one registry by id, each parsed once (module doc)."""

    def __init__(self, client: RegistryClient) -> None:
        self.client = client
        self._by_id: dict[int, RegisteredSchema] = {}
        self._lock = threading.Lock()

    def by_id(self, schema_id: int) -> RegisteredSchema:
        """The schema registered under ``schema_id``; ``UnknownSchemaIdError`` if none is."""
        found = self._by_id.get(schema_id)
        if found is not None:
            return found
        with self._lock:
            found = self._by_id.get(schema_id)
            if found is None:
                found = self._by_id[schema_id] = self._fetch(schema_id)
            return found

    def _fetch(self, schema_id: int) -> RegisteredSchema:
        try:
            doc = self.client.request("GET", f"/schemas/ids/{int(schema_id)}")
        except SchemaNotFoundError as exc:
            raise UnknownSchemaIdError(
                f"schema id {schema_id} from the message header is not in the registry at "
                f"{self.client.url}: {exc}"
            ) from exc
        references = tuple(self._references(doc.get("references") or [], {}))
        try:
            parsed = parse_schema(str(doc["schema"]), doc.get("schemaType"), references)
        except InvalidSchemaError as exc:  # the registry accepted it: a registry of a newer kind
            raise UnknownSchemaIdError(
                f"schema id {schema_id}: expected a schema this client can parse, found: {exc}"
            ) from exc
        return RegisteredSchema(schema_id, parsed, references)

    def _references(
        self, refs: list[Any], memo: dict[str, list[ResolvedReference]]
    ) -> list[ResolvedReference]:
        """The references ``refs`` name, with theirs, dependencies first, each once; ``memo``
        holds each name's resolution (its dependencies, then itself) for this fetch."""
        resolved: list[ResolvedReference] = []
        for ref in refs:
            for found in self._resolve(ref, memo):
                if all(r.name != found.name for r in resolved):
                    resolved.append(found)
        return resolved

    def _resolve(
        self, ref: Any, memo: dict[str, list[ResolvedReference]]
    ) -> list[ResolvedReference]:
        name = str(ref["name"])
        if name not in memo:
            doc = self.client.get_version(str(ref["subject"]), ref["version"])
            deps = self._references(doc.get("references") or [], memo)
            parsed = parse_schema(str(doc["schema"]), doc.get("schemaType"), deps)
            memo[name] = [*deps, ResolvedReference(name, parsed)]
        return memo[name]


_DIRECTORIES: dict[str, SchemaDirectory] = {}
_DIRECTORIES_LOCK = threading.Lock()


def directory(registry_url: str) -> SchemaDirectory:
    """The process-wide ``SchemaDirectory`` of the registry at ``registry_url``."""
    with _DIRECTORIES_LOCK:
        found = _DIRECTORIES.get(registry_url)
        if found is None:
            found = _DIRECTORIES[registry_url] = SchemaDirectory(RegistryClient(registry_url))
        return found
