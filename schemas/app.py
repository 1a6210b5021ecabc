"""HTTP routes of the registry: Confluent's REST API over a
:class:`~sluice.schemas.registry.Registry`. The handlers are
:class:`~sluice.schemas.routes.RegistryRoutes`; this module puts them together with the
middleware and the error answers.

Requests and responses use ``application/vnd.schemaregistry.v1+json`` (plain JSON is accepted
too). Errors are ``{"error_code": int, "message": str}`` with the HTTP status of the code
(see
:mod:`sluice.schemas.errors`). A subject ``:.ctx:name`` is ``name`` in the context ``.ctx``,
whose schema ids are its own (:mod:`sluice.schemas.context`); a request by id names the
context with ``?subject=``. Boolean query parameters accept ``true``/``True``
(confluent-kafka-python
sends Python's ``str(True)``).

==========================================================  ===================================
route                                                       body → response
==========================================================  ===================================
``GET /``                                                   ``{}``
``GET /schemas/types``                                      ``["JSON", "PROTOBUF", "AVRO"]``
``GET /schemas/ids/{id}[?format=serialized&subject=s]``     ``{"schema", "schemaType"?,
                                                            "references"?, "metadata"?,
                                                            "ruleSet"?}``
``GET /schemas/ids/{id}/schema``                            the schema itself
``GET /schemas/ids/{id}/versions``                          ``[{"subject", "version"}]``
``GET /schemas/ids/{id}/subjects``                          ``[subject]``
``GET /schemas[?subjectPrefix&latestOnly&deleted&offset&    ``[{"subject","version","id",
limit]``                                                    "schema", ...}]``
``GET /subjects``                                           ``[subject]``
``POST /subjects/{s}``  (lookup)                            ``{"schema", "schemaType"?,
                                                            "references"?}`` → a version
``DELETE /subjects/{s}[?permanent=true]``                   ``[version]``
``GET /subjects/{s}/versions``                              ``[version]``
``POST /subjects/{s}/versions``  (register)                 ``{"schema", "schemaType"?,
                                                            "references"?, "metadata"?,
                                                            "ruleSet"?, "id"?, "version"?}``
                                                            → ``{"id"}``
``GET /subjects/{s}/versions/{v|latest}``                   ``{"subject","version","id","schema",
                                                            "schemaType"?, "references"?,
                                                            "metadata"?, "ruleSet"?}``
``GET /subjects/{s}/versions/{v|latest}/schema``            the schema itself
``GET /subjects/{s}/versions/{v}/referencedby``             ``[id]``
``DELETE /subjects/{s}/versions/{v}[?permanent=true]``      ``version``
``GET /subjects/{s}/metadata?key=k&value=v...``             the latest version with them
``POST /compatibility/subjects/{s}/versions[/{v}]``         → ``{"is_compatible", "messages"?}``
``GET|PUT /config``, ``GET|PUT|DELETE /config/{s}``         ``{"compatibility"}`` →
                                                            ``{"compatibilityLevel"}``
``GET|PUT|DELETE /mode``, ``GET|PUT|DELETE /mode/{s}``      ``{"mode"}`` → ``{"mode"}``
``GET /contexts``                                           ``[".", ".ctx", ...]``
``/contexts/{ctx}/…`` (any route above)                     the route in the context ``ctx``
                                                            (:mod:`sluice.schemas.context_path`)
``GET /v1/metadata/id``, ``GET /v1/metadata/version``       the server's id and version
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

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response

from sluice.schemas.basic_auth import BasicAuthenticator, BasicAuthMiddleware
from sluice.schemas.context_path import ContextPrefix
from sluice.schemas.errors import InvalidSchemaError, RegistryError
from sluice.schemas.limits import MAX_SCHEMA_DEPTH_KEY, RegistryLimits
from sluice.schemas.registry import Registry
from sluice.schemas.request_body import BodySizeLimit
from sluice.schemas.routes import CONTENT_TYPE, RegistryRoutes, json_response

__all__ = ["CONTENT_TYPE", "create_app"]

log = logging.getLogger(__name__)


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
    middleware = []
    if authenticator is not None:  # outermost: nothing is read before the credentials check
        middleware.append(
            Middleware(BasicAuthMiddleware, authenticator=authenticator, content_type=CONTENT_TYPE)
        )
    if limits.max_body_size is not None:
        middleware.append(
            Middleware(BodySizeLimit, max_bytes=limits.max_body_size, content_type=CONTENT_TYPE)
        )
    # Innermost: a /contexts/{ctx}/ URL becomes the plain request it stands for.
    middleware.append(Middleware(ContextPrefix, content_type=CONTENT_TYPE))
    app = Starlette(
        routes=RegistryRoutes(registry, limits).routes(),
        middleware=middleware,
        exception_handlers={
            RegistryError: _registry_error,
            HTTPException: _http_error,
            RecursionError: _too_deep,
            Exception: _internal_error,
        },
    )
    # Starlette answers "/subjects/" with a bodiless 307 to "/subjects"; a registry answers
    # JSON only, so an unknown path (trailing slash included) is a 404 with an error body.
    app.router.redirect_slashes = False
    return app


async def _registry_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RegistryError)
    if exc.http_status >= 500:
        log.error("%s %s failed: %s", request.method, request.url.path, exc.message)
    return json_response(exc.to_json(), status_code=exc.http_status)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return json_response({"error_code": exc.status_code, "message": exc.detail}, exc.status_code)


async def _too_deep(request: Request, exc: Exception) -> Response:
    # The depth limits keep the recursive parsers far from the interpreter's limit; this
    # handler is the backstop that keeps a miss a client error rather than a 500.
    log.warning("%s %s: %r", request.method, request.url.path, exc)
    error = InvalidSchemaError(
        f"Invalid schema: nested too deeply to process (the limit {MAX_SCHEMA_DEPTH_KEY})"
    )
    return json_response(error.to_json(), status_code=error.http_status)


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.exception("%s %s failed", request.method, request.url.path)
    return json_response({"error_code": 50000, "message": f"Internal Server Error: {exc}"}, 500)
