"""The registry's REST handlers: :class:`RegistryRoutes`, one async method per route of the
table in :mod:`sluice.schemas.app`, over one :class:`~sluice.schemas.registry.Registry`.

A handler reads the path and query (``_flag``: ``true``/``True`` is true, anything else
false), reads a body through ``_body`` (depth-bounded JSON, always an object) or
``_schema_body`` (a ``"schema"`` string within the schema limits), calls the registry in
Starlette's thread pool (registry calls block: they may fsync; the registry's own lock orders
them) and answers ``application/vnd.schemaregistry.v1+json``. Failures are raised as
:class:`~sluice.schemas.errors.RegistryError` and answered by the application's exception
handlers, not here.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sluice import __version__ as SLUICE_VERSION
from sluice.schemas.avro_schema import AVRO
from sluice.schemas.errors import BadRequestError, InvalidSchemaError, SchemaNotFoundError
from sluice.schemas.json_text import JsonSyntaxError, JsonTooDeepError, loads
from sluice.schemas.limits import MAX_REQUEST_DEPTH_KEY, RegistryLimits
from sluice.schemas.registry import Registry, VersionInfo
from sluice.schemas.schema_request import SchemaRequest
from sluice.schemas.store import Reference, StoredSchema

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
# What Confluent's registry answers to GET /schemas/types, in its order.
SCHEMA_TYPES = ["JSON", "PROTOBUF", "AVRO"]

Handler = Callable[[Request], Awaitable[Response]]


class SubjectConvertor(Convertor[str]):
    """A subject in a path: one or more segments, neither starting nor ending with "/"."""

    regex = r"[^/](?:.*[^/])?"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("subject", SubjectConvertor())


class RegistryJSONResponse(JSONResponse):
    media_type = CONTENT_TYPE


def json_response(content: Any, status_code: int = 200) -> Response:
    """``content`` as a registry JSON body (compact, the registry's media type)."""
    return RegistryJSONResponse(content, status_code=status_code)


def _raw_json(text: str) -> Response:
    """A stored schema text as the body: it is compact JSON already, as ``json_response``
    would write it, so it is not decoded again (no recursion, no cost)."""
    return Response(text, media_type=CONTENT_TYPE)


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").strip().lower() == "true"


async def _body(request: Request, limits: RegistryLimits) -> dict[str, Any]:
    raw = await request.body()
    try:
        body = loads(raw, limits.max_request_depth) if raw else None
    except JsonSyntaxError as e:
        raise BadRequestError(f"Unrecognized JSON: {e}") from e
    except JsonTooDeepError as e:
        raise BadRequestError(f"Request body {e} (the limit {MAX_REQUEST_DEPTH_KEY})") from e
    if not isinstance(body, dict):
        raise BadRequestError(f"expected a JSON object, found {type(body).__name__}")
    return body


async def _schema_body(request: Request, limits: RegistryLimits) -> SchemaRequest:
    body = await _body(request, limits)
    schema = body.get("schema")
    if not isinstance(schema, str):
        # Confluent answers a missing schema with 42201 too.
        raise InvalidSchemaError(
            f'Invalid schema: expected "schema" to be a string, found {type(schema).__name__}'
        )
    limits.check_schema(schema)
    return SchemaRequest(
        schema,
        body.get("schemaType") or AVRO,
        body.get("references"),
        body.get("metadata"),
        body.get("ruleSet"),
        body.get("id"),
        body.get("version"),
    )


def _extras(
    body: dict[str, Any],
    schema_type: str,
    references: tuple[Reference, ...],
    metadata: str | None,
    rule_set: str | None,
) -> dict[str, Any]:
    """Add what Confluent writes beside a schema only when set: ``schemaType`` (not for
    AVRO), ``references``, ``metadata``, ``ruleSet``."""
    if schema_type != AVRO:
        body["schemaType"] = schema_type
    if references:
        body["references"] = [r.to_json() for r in references]
    if metadata is not None:
        body["metadata"] = json.loads(metadata)
    if rule_set is not None:
        body["ruleSet"] = json.loads(rule_set)
    return body


def _format(request: Request) -> str | None:
    """The request's ``format`` (``serialized``: a Protobuf schema as its base64 descriptor)."""
    return request.query_params.get("format")


def _version_body(info: VersionInfo) -> dict[str, Any]:
    body: dict[str, Any] = {
        "subject": info.subject,
        "version": info.version,
        "id": info.id,
        "schema": info.schema,
    }
    return _extras(body, info.schema_type, info.references, info.metadata, info.rule_set)


def _int_param(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError as e:
        raise BadRequestError(f"query parameter {name}: expected an integer, found {raw!r}") from e


def _stored_body(stored: StoredSchema) -> dict[str, Any]:
    body: dict[str, Any] = {"schema": stored.text}
    return _extras(body, stored.schema_type, stored.references, stored.metadata, stored.rule_set)


def _id_subject(request: Request) -> str | None:
    """The ``subject`` a request by id names: its context is the one the id is of."""
    return request.query_params.get("subject") or None


def _schema_id(request: Request) -> int:
    raw = request.path_params["id"]
    try:
        return int(raw)
    except ValueError as e:
        raise SchemaNotFoundError(f"Schema {raw} not found") from e


def _no_subject(request: Request) -> str | None:
    return None


def _path_subject(request: Request) -> str | None:
    subject: str = request.path_params["subject"]
    return subject


class RegistryRoutes:
    """The handlers of every route, bound to one registry and its limits.

    Holds no state of its own beyond the two; thread-safe as far as the registry is (the
    handlers run on the event loop and call the registry only in the thread pool).
    """

    def __init__(self, registry: Registry, limits: RegistryLimits) -> None:
        self.registry = registry
        self.limits = limits

    def routes(self) -> list[Route]:
        """The route table, in the order Starlette matches it."""
        # A subject may hold "/" (confluent-kafka's Protobuf serializer registers an imported
        # file under its path, e.g. "acme/money.proto"; the server decodes its %2F before
        # routing), so the subject's routes match the longest suffix first and the bare
        # subject last.
        s = "/subjects/{subject:subject}"
        compatibility = "/compatibility" + s + "/versions"
        config_methods = ["GET", "PUT", "DELETE"]
        return [
            Route("/", self.root, methods=["GET"]),
            Route("/schemas/types", self.schema_types, methods=["GET"]),
            Route("/schemas/ids/{id}", self.schema_by_id, methods=["GET"]),
            Route("/schemas/ids/{id}/schema", self.raw_schema_by_id, methods=["GET"]),
            Route("/schemas/ids/{id}/versions", self.versions_of_schema, methods=["GET"]),
            Route("/schemas/ids/{id}/subjects", self.subjects_of_schema, methods=["GET"]),
            Route("/schemas", self.list_schemas, methods=["GET"]),
            Route("/subjects", self.list_subjects, methods=["GET"]),
            Route(s + "/versions/{version}/referencedby", self.referenced_by, methods=["GET"]),
            Route(s + "/versions/{version}/schema", self.raw_version_schema, methods=["GET"]),
            Route(s + "/versions/{version}", self.get_version, methods=["GET"]),
            Route(s + "/versions/{version}", self.delete_version, methods=["DELETE"]),
            Route(s + "/versions", self.list_versions, methods=["GET"]),
            Route(s + "/versions", self.register, methods=["POST"]),
            Route(s + "/metadata", self.latest_with_metadata, methods=["GET"]),
            Route(s, self.lookup, methods=["POST"]),
            Route(s, self.delete_subject, methods=["DELETE"]),
            Route(compatibility + "/{version}", self.compatibility, methods=["POST"]),
            Route(compatibility, self.compatibility, methods=["POST"]),
            Route("/config", self.config_endpoint(_no_subject), methods=config_methods),
            Route(
                "/config/{subject:subject}",
                self.config_endpoint(_path_subject),
                methods=config_methods,
            ),
            Route("/mode", self.mode_endpoint(_no_subject), methods=["GET", "PUT", "DELETE"]),
            Route(
                "/mode/{subject:subject}", self.mode_endpoint(_path_subject), methods=config_methods
            ),
            Route("/contexts", self.contexts, methods=["GET"]),
            Route("/v1/metadata/id", self.metadata_id, methods=["GET"]),
            Route("/v1/metadata/version", self.metadata_version, methods=["GET"]),
        ]

    # --- the service ---------------------------------------------------------------------

    async def root(self, request: Request) -> Response:
        return json_response({})

    async def schema_types(self, request: Request) -> Response:
        return json_response(SCHEMA_TYPES)

    async def contexts(self, request: Request) -> Response:
        return json_response(await run_in_threadpool(self.registry.contexts))

    async def metadata_id(self, request: Request) -> Response:
        # Confluent's ServerMetadataResource: the cluster this registry belongs to. Sluice's
        # registry has no Kafka cluster of its own (its stores are a file or ZooKeeper).
        return json_response(
            {"scope": {"path": [], "clusters": {"schema-registry-cluster": "sluice"}}, "id": ""}
        )

    async def metadata_version(self, request: Request) -> Response:
        return json_response({"version": SLUICE_VERSION, "commitId": ""})

    # --- schemas by id -------------------------------------------------------------------

    async def schema_by_id(self, request: Request) -> Response:
        stored = await run_in_threadpool(
            lambda: self.registry.schema_by_id(
                _schema_id(request), fmt=_format(request), subject=_id_subject(request)
            )
        )
        return json_response(_stored_body(stored))

    async def raw_schema_by_id(self, request: Request) -> Response:
        stored = await run_in_threadpool(
            lambda: self.registry.schema_by_id(
                _schema_id(request), fmt=_format(request), subject=_id_subject(request)
            )
        )
        return _raw_json(stored.text)

    async def versions_of_schema(self, request: Request) -> Response:
        pairs = await run_in_threadpool(
            lambda: self.registry.versions_of_schema(
                _schema_id(request),
                include_deleted=_flag(request, "deleted"),
                subject=_id_subject(request),
            )
        )
        return json_response([{"subject": s, "version": v} for s, v in pairs])

    async def subjects_of_schema(self, request: Request) -> Response:
        pairs = await run_in_threadpool(
            lambda: self.registry.versions_of_schema(
                _schema_id(request),
                include_deleted=_flag(request, "deleted"),
                subject=_id_subject(request),
            )
        )
        return json_response(sorted({s for s, _ in pairs}))

    # --- subjects ------------------------------------------------------------------------

    async def list_subjects(self, request: Request) -> Response:
        subjects = await run_in_threadpool(
            lambda: self.registry.subjects(
                include_deleted=_flag(request, "deleted"),
                deleted_only=_flag(request, "deleted_only"),
                prefix=request.query_params.get("subjectPrefix", ""),
            )
        )
        return json_response(subjects)

    async def lookup(self, request: Request) -> Response:
        schema = await _schema_body(request, self.limits)
        info = await run_in_threadpool(
            lambda: self.registry.lookup(
                request.path_params["subject"], schema, include_deleted=_flag(request, "deleted")
            )
        )
        return json_response(_version_body(info))

    async def delete_subject(self, request: Request) -> Response:
        versions = await run_in_threadpool(
            lambda: self.registry.delete_subject(
                request.path_params["subject"], permanent=_flag(request, "permanent")
            )
        )
        return json_response(versions)

    # --- versions of a subject -----------------------------------------------------------

    async def list_versions(self, request: Request) -> Response:
        versions = await run_in_threadpool(
            lambda: self.registry.versions(
                request.path_params["subject"],
                include_deleted=_flag(request, "deleted"),
                deleted_only=_flag(request, "deleted_only"),
            )
        )
        return json_response(versions)

    async def register(self, request: Request) -> Response:
        schema = await _schema_body(request, self.limits)
        subject = request.path_params["subject"]
        self.limits.check_subject(subject)
        schema_id = await run_in_threadpool(self.registry.register, subject, schema)
        return json_response({"id": schema_id})

    async def get_version(self, request: Request) -> Response:
        info = await run_in_threadpool(
            lambda: self.registry.get_version(
                request.path_params["subject"],
                request.path_params["version"],
                include_deleted=_flag(request, "deleted"),
                fmt=_format(request),
            )
        )
        return json_response(_version_body(info))

    async def raw_version_schema(self, request: Request) -> Response:
        info = await run_in_threadpool(
            lambda: self.registry.get_version(
                request.path_params["subject"],
                request.path_params["version"],
                include_deleted=_flag(request, "deleted"),
            )
        )
        return _raw_json(info.schema)

    async def delete_version(self, request: Request) -> Response:
        version = await run_in_threadpool(
            lambda: self.registry.delete_version(
                request.path_params["subject"],
                request.path_params["version"],
                permanent=_flag(request, "permanent"),
            )
        )
        return json_response(version)

    async def referenced_by(self, request: Request) -> Response:
        ids = await run_in_threadpool(
            lambda: self.registry.referenced_by(
                request.path_params["subject"],
                request.path_params["version"],
                include_deleted=_flag(request, "deleted"),
            )
        )
        return json_response(ids)

    async def latest_with_metadata(self, request: Request) -> Response:
        keys = request.query_params.getlist("key")
        values = request.query_params.getlist("value")
        if len(keys) != len(values):
            raise BadRequestError(
                f"expected as many values as keys, found {len(keys)} keys and {len(values)} values"
            )
        info = await run_in_threadpool(
            lambda: self.registry.latest_with_metadata(
                request.path_params["subject"],
                dict(zip(keys, values, strict=True)),
                include_deleted=_flag(request, "deleted"),
                fmt=_format(request),
            )
        )
        return json_response(_version_body(info))

    async def list_schemas(self, request: Request) -> Response:
        infos = await run_in_threadpool(
            lambda: self.registry.list_schemas(
                prefix=request.query_params.get("subjectPrefix", ""),
                latest_only=_flag(request, "latestOnly"),
                include_deleted=_flag(request, "deleted"),
                offset=_int_param(request, "offset", 0),
                limit=_int_param(request, "limit", -1),
            )
        )
        return json_response([_version_body(info) for info in infos])

    # --- compatibility -------------------------------------------------------------------

    async def compatibility(self, request: Request) -> Response:
        schema = await _schema_body(request, self.limits)
        messages = await run_in_threadpool(
            self.registry.test_compatibility,
            request.path_params["subject"],
            request.path_params.get("version"),
            schema,
        )
        body: dict[str, Any] = {"is_compatible": not messages}
        if _flag(request, "verbose"):
            body["messages"] = messages
        return json_response(body)

    # --- config: global (subject None) and per subject -----------------------------------

    def config_endpoint(self, subject_of: Callable[[Request], str | None]) -> Handler:
        """One endpoint for GET, PUT and DELETE of the config ``subject_of`` names."""

        async def endpoint(request: Request) -> Response:
            # Starlette routes HEAD to any route with GET; answer it as GET (uvicorn drops the
            # body).
            method = "GET" if request.method == "HEAD" else request.method
            subject = subject_of(request)
            if method == "GET":
                return await self.get_config(request, subject)
            if method == "PUT":
                return await self.put_config(request, subject)
            return await self.delete_config(subject)

        return endpoint

    async def get_config(self, request: Request, subject: str | None) -> Response:
        level = await run_in_threadpool(
            lambda: self.registry.get_config(
                subject, default_to_global=_flag(request, "defaultToGlobal")
            )
        )
        return json_response({"compatibilityLevel": level})

    async def put_config(self, request: Request, subject: str | None) -> Response:
        if subject is not None:
            self.limits.check_subject(subject)
        body = await _body(request, self.limits)
        level = await run_in_threadpool(
            self.registry.set_config, subject, body.get("compatibility")
        )
        return json_response({"compatibility": level})

    async def delete_config(self, subject: str | None) -> Response:
        level = await run_in_threadpool(self.registry.delete_config, subject)
        return json_response({"compatibilityLevel": level})

    # --- modes: global (subject None) and per subject ------------------------------------

    def mode_endpoint(self, subject_of: Callable[[Request], str | None]) -> Handler:
        """One endpoint for GET, PUT and DELETE of the mode ``subject_of`` names."""

        async def endpoint(request: Request) -> Response:
            method = "GET" if request.method == "HEAD" else request.method
            subject = subject_of(request)
            if method == "GET":
                mode = await run_in_threadpool(
                    lambda: self.registry.get_mode(
                        subject, default_to_global=_flag(request, "defaultToGlobal")
                    )
                )
            elif method == "PUT":
                if subject is not None:
                    self.limits.check_subject(subject)
                body = await _body(request, self.limits)
                mode = await run_in_threadpool(
                    lambda: self.registry.set_mode(
                        subject, body.get("mode"), force=_flag(request, "force")
                    )
                )
            else:
                mode = await run_in_threadpool(self.registry.delete_mode, subject)
            return json_response({"mode": mode})

        return endpoint
