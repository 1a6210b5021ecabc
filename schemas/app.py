"""HTTP routes of the registry: Confluent's REST API over a
:class:`~sluice.schemas.registry.Registry`.

Requests and responses use ``application/vnd.schemaregistry.v1+json`` (plain JSON is accepted
too). Errors are ``{"error_code": int, "message": str}`` with the HTTP status of the code
(see
:mod:`sluice.schemas.errors`). Boolean query parameters accept ``true``/``True``
(confluent-kafka-python
sends Python's ``str(True)``).

==========================================================  ===================================
route                                                       body → response
==========================================================  ===================================
``GET /``                                                   ``{}``
``GET /schemas/types``                                      ``["AVRO"]``
``GET /schemas/ids/{id}``                                   ``{"schema"}``
``GET /schemas/ids/{id}/schema``                            the schema itself
``GET /schemas/ids/{id}/versions``                          ``[{"subject", "version"}]``
``GET /schemas/ids/{id}/subjects``                          ``[subject]``
``GET /subjects``                                           ``[subject]``
``POST /subjects/{s}``  (lookup)                            ``{"schema", "schemaType"?}`` →
                                                            ``{"subject","id","version","schema"}``
``DELETE /subjects/{s}[?permanent=true]``                   ``[version]``
``GET /subjects/{s}/versions``                              ``[version]``
``POST /subjects/{s}/versions``  (register)                 ``{"schema", ...}`` → ``{"id"}``
``GET /subjects/{s}/versions/{v|latest}``                   ``{"subject","version","id","schema"}``
``GET /subjects/{s}/versions/{v|latest}/schema``            the schema itself
``DELETE /subjects/{s}/versions/{v}[?permanent=true]``      ``version``
``POST /compatibility/subjects/{s}/versions[/{v}]``         → ``{"is_compatible", "messages"?}``
``GET|PUT /config``, ``GET|PUT|DELETE /config/{s}``         ``{"compatibility"}`` →
                                                            ``{"compatibilityLevel"}``
``GET /mode``, ``GET /mode/{s}``                            ``{"mode": "READWRITE"}``
==========================================================  ===================================

Authentication (:mod:`sluice.schemas.basic_auth`): with ``authentication.method=BASIC`` every
route answers 401 (``WWW-Authenticate: Basic realm=...``, ``{"error_code": 401}``) without
valid credentials, 403 without an allowed role, before the body is read.

Hostile input (see :mod:`sluice.schemas.limits` for the keys): a body over the size limit is
answered 413 before it is buffered (:mod:`sluice.schemas.request_body`); a body is measured for
nesting before ``json`` decodes it (400 when too deep or not strict JSON); a schema is checked
for size (42209) and nesting (42201) before the Avro parser sees it; a registered or configured
subject must be a valid name (42208). Every answer, errors included, is a JSON body: handlers
raise :class:`~sluice.schemas.errors.RegistryError`, Starlette's own 404/405 become
``{"error_code": 404|405}``, a ``RecursionError`` that got past the limits is a 42201, and
anything else is a logged 50000.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sluice.schemas.avro_schema import AVRO
from sluice.schemas.basic_auth import BasicAuthenticator, BasicAuthMiddleware
from sluice.schemas.errors import (
    BadRequestError,
    InvalidSchemaError,
    RegistryError,
    SchemaNotFoundError,
)
from sluice.schemas.json_text import JsonSyntaxError, JsonTooDeepError, loads
from sluice.schemas.limits import MAX_REQUEST_DEPTH_KEY, MAX_SCHEMA_DEPTH_KEY, RegistryLimits
from sluice.schemas.registry import Registry, VersionInfo
from sluice.schemas.request_body import BodySizeLimit

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"

log = logging.getLogger(__name__)


class RegistryJSONResponse(JSONResponse):
    media_type = CONTENT_TYPE


def _json(content: Any, status_code: int = 200) -> Response:
    return RegistryJSONResponse(content, status_code=status_code)


def _raw_json(text: str) -> Response:
    """A stored schema text as the body: it is compact JSON already, as ``_json`` would write
    it, so it is not decoded again (no recursion, no cost)."""
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


async def _schema_body(request: Request, limits: RegistryLimits) -> tuple[str, str | None, object]:
    body = await _body(request, limits)
    schema = body.get("schema")
    if not isinstance(schema, str):
        # Confluent answers a missing schema with 42201 too.
        raise InvalidSchemaError(
            f'Invalid schema: expected "schema" to be a string, found {type(schema).__name__}'
        )
    limits.check_schema(schema)
    return schema, body.get("schemaType") or AVRO, body.get("references")


def _version_body(info: VersionInfo) -> dict[str, Any]:
    body: dict[str, Any] = {
        "subject": info.subject,
        "version": info.version,
        "id": info.id,
        "schema": info.schema,
    }
    if info.schema_type != AVRO:  # Confluent omits the default type
        body["schemaType"] = info.schema_type
    return body


def _schema_id(request: Request) -> int:
    raw = request.path_params["id"]
    try:
        return int(raw)
    except ValueError as e:
        raise SchemaNotFoundError(f"Schema {raw} not found") from e


Handler = Callable[[Request], Awaitable[Response]]


def create_app(
    registry: Registry,
    limits: RegistryLimits | None = None,
    authenticator: BasicAuthenticator | None = None,
) -> Starlette:
    """The ASGI application serving ``registry`` within ``limits`` (default: the defaults),
    to the users of ``authenticator`` only when one is given (401/403 before anything else).

    Registry calls block (they may fsync), so they run in Starlette's thread pool; the
    registry's own lock orders them.
    """
    limits = limits or RegistryLimits()

    async def root(request: Request) -> Response:
        return _json({})

    async def schema_types(request: Request) -> Response:
        return _json([AVRO])

    async def schema_by_id(request: Request) -> Response:
        stored = await run_in_threadpool(registry.schema_by_id, _schema_id(request))
        body: dict[str, Any] = {"schema": stored.text}
        if stored.schema_type != AVRO:
            body["schemaType"] = stored.schema_type
        return _json(body)

    async def raw_schema_by_id(request: Request) -> Response:
        stored = await run_in_threadpool(registry.schema_by_id, _schema_id(request))
        return _raw_json(stored.text)

    async def versions_of_schema(request: Request) -> Response:
        pairs = await run_in_threadpool(
            lambda: registry.versions_of_schema(
                _schema_id(request), include_deleted=_flag(request, "deleted")
            )
        )
        return _json([{"subject": s, "version": v} for s, v in pairs])

    async def subjects_of_schema(request: Request) -> Response:
        pairs = await run_in_threadpool(
            lambda: registry.versions_of_schema(
                _schema_id(request), include_deleted=_flag(request, "deleted")
            )
        )
        return _json(sorted({s for s, _ in pairs}))

    async def list_subjects(request: Request) -> Response:
        subjects = await run_in_threadpool(
            lambda: registry.subjects(
                include_deleted=_flag(request, "deleted"),
                deleted_only=_flag(request, "deleted_only"),
                prefix=request.query_params.get("subjectPrefix", ""),
            )
        )
        return _json(subjects)

    async def lookup(request: Request) -> Response:
        schema, schema_type, refs = await _schema_body(request, limits)
        info = await run_in_threadpool(
            lambda: registry.lookup(
                request.path_params["subject"],
                schema,
                schema_type,
                refs,
                include_deleted=_flag(request, "deleted"),
            )
        )
        return _json(_version_body(info))

    async def delete_subject(request: Request) -> Response:
        versions = await run_in_threadpool(
            lambda: registry.delete_subject(
                request.path_params["subject"], permanent=_flag(request, "permanent")
            )
        )
        return _json(versions)

    async def list_versions(request: Request) -> Response:
        versions = await run_in_threadpool(
            lambda: registry.versions(
                request.path_params["subject"],
                include_deleted=_flag(request, "deleted"),
                deleted_only=_flag(request, "deleted_only"),
            )
        )
        return _json(versions)

    async def register(request: Request) -> Response:
        schema, schema_type, refs = await _schema_body(request, limits)
        subject = request.path_params["subject"]
        limits.check_subject(subject)
        schema_id = await run_in_threadpool(registry.register, subject, schema, schema_type, refs)
        return _json({"id": schema_id})

    async def get_version(request: Request) -> Response:
        info = await run_in_threadpool(
            lambda: registry.get_version(
                request.path_params["subject"],
                request.path_params["version"],
                include_deleted=_flag(request, "deleted"),
            )
        )
        return _json(_version_body(info))

    async def raw_version_schema(request: Request) -> Response:
        info = await run_in_threadpool(
            lambda: registry.get_version(
                request.path_params["subject"],
                request.path_params["version"],
                include_deleted=_flag(request, "deleted"),
            )
        )
        return _raw_json(info.schema)

    async def delete_version(request: Request) -> Response:
        version = await run_in_threadpool(
            lambda: registry.delete_version(
                request.path_params["subject"],
                request.path_params["version"],
                permanent=_flag(request, "permanent"),
            )
        )
        return _json(version)

    async def compatibility(request: Request) -> Response:
        schema, schema_type, refs = await _schema_body(request, limits)
        messages = await run_in_threadpool(
            registry.test_compatibility,
            request.path_params["subject"],
            request.path_params.get("version"),
            schema,
            schema_type,
            refs,
        )
        body: dict[str, Any] = {"is_compatible": not messages}
        if _flag(request, "verbose"):
            body["messages"] = messages
        return _json(body)

    def config_routes(subject_of: Callable[[Request], str | None]) -> dict[str, Handler]:
        async def get(request: Request) -> Response:
            level = await run_in_threadpool(
                lambda: registry.get_config(
                    subject_of(request), default_to_global=_flag(request, "defaultToGlobal")
                )
            )
            return _json({"compatibilityLevel": level})

        async def put(request: Request) -> Response:
            subject = subject_of(request)
            if subject is not None:
                limits.check_subject(subject)
            body = await _body(request, limits)
            level = await run_in_threadpool(registry.set_config, subject, body.get("compatibility"))
            return _json({"compatibility": level})

        async def delete(request: Request) -> Response:
            level = await run_in_threadpool(registry.delete_config, subject_of(request))
            return _json({"compatibilityLevel": level})

        return {"GET": get, "PUT": put, "DELETE": delete}

    def dispatch(handlers: dict[str, Handler]) -> Handler:
        async def endpoint(request: Request) -> Response:
            # Starlette routes HEAD to any route with GET; answer it as GET (uvicorn drops the
            # body).
            method = "GET" if request.method == "HEAD" else request.method
            return await handlers[method](request)

        return endpoint

    global_config = config_routes(lambda request: None)
    subject_config = config_routes(lambda request: request.path_params["subject"])

    async def mode(request: Request) -> Response:
        return _json({"mode": "READWRITE"})

    async def registry_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RegistryError)
        if exc.http_status >= 500:
            log.error("%s %s failed: %s", request.method, request.url.path, exc.message)
        return _json(exc.to_json(), status_code=exc.http_status)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return _json({"error_code": exc.status_code, "message": exc.detail}, exc.status_code)

    async def too_deep(request: Request, exc: Exception) -> Response:
        # The depth limits keep the recursive parsers far from the interpreter's limit; this
        # handler is the backstop that keeps a miss a client error rather than a 500.
        log.warning("%s %s: %r", request.method, request.url.path, exc)
        error = InvalidSchemaError(
            f"Invalid schema: nested too deeply to process (the limit {MAX_SCHEMA_DEPTH_KEY})"
        )
        return _json(error.to_json(), status_code=error.http_status)

    async def internal_error(request: Request, exc: Exception) -> Response:
        log.exception("%s %s failed", request.method, request.url.path)
        return _json({"error_code": 50000, "message": f"Internal Server Error: {exc}"}, 500)

    s = "/subjects/{subject}"
    routes = [
        Route("/", root, methods=["GET"]),
        Route("/schemas/types", schema_types, methods=["GET"]),
        Route("/schemas/ids/{id}", schema_by_id, methods=["GET"]),
        Route("/schemas/ids/{id}/schema", raw_schema_by_id, methods=["GET"]),
        Route("/schemas/ids/{id}/versions", versions_of_schema, methods=["GET"]),
        Route("/schemas/ids/{id}/subjects", subjects_of_schema, methods=["GET"]),
        Route("/subjects", list_subjects, methods=["GET"]),
        Route(s, lookup, methods=["POST"]),
        Route(s, delete_subject, methods=["DELETE"]),
        Route(s + "/versions", list_versions, methods=["GET"]),
        Route(s + "/versions", register, methods=["POST"]),
        Route(s + "/versions/{version}", get_version, methods=["GET"]),
        Route(s + "/versions/{version}", delete_version, methods=["DELETE"]),
        Route(s + "/versions/{version}/schema", raw_version_schema, methods=["GET"]),
        Route("/compatibility" + s + "/versions", compatibility, methods=["POST"]),
        Route("/compatibility" + s + "/versions/{version}", compatibility, methods=["POST"]),
        Route("/config", dispatch(global_config), methods=["GET", "PUT", "DELETE"]),
        Route("/config/{subject}", dispatch(subject_config), methods=["GET", "PUT", "DELETE"]),
        Route("/mode", mode, methods=["GET"]),
        Route("/mode/{subject}", mode, methods=["GET"]),
    ]
    middleware = []
    if authenticator is not None:  # outermost: nothing is read before the credentials check
        middleware.append(
            Middleware(BasicAuthMiddleware, authenticator=authenticator, content_type=CONTENT_TYPE)
        )
    if limits.max_body_size is not None:
        middleware.append(
            Middleware(BodySizeLimit, max_bytes=limits.max_body_size, content_type=CONTENT_TYPE)
        )
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={
            RegistryError: registry_error,
            HTTPException: http_error,
            RecursionError: too_deep,
            Exception: internal_error,
        },
    )
    # Starlette answers "/subjects/" with a bodiless 307 to "/subjects"; a registry answers
    # JSON only, so an unknown path (trailing slash included) is a 404 with an error body.
    app.router.redirect_slashes = False
    return app
