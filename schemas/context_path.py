"""Context-prefixed URLs: ``/contexts/{ctx}/…`` is the same request against the context ``ctx``.

Confluent's registry lets a client that works in one context keep its plain subject names by
putting the context in the URL instead of in every subject (its ``ContextFilter``); migration
tools and clients configured with a context base URL (``http://sr/contexts/.billing``) send
these. The rewrite is Confluent's, segment by segment:

==============================================  ==============================================
request                                         served as
==============================================  ==============================================
``/contexts/.ctx/subjects/s/versions``          ``/subjects/:.ctx:s/versions``
``/contexts/ctx/subjects/s`` (no leading dot)   ``/subjects/:.ctx:s``
``/contexts/.ctx/subjects/:.ctx:s/versions``    unchanged subject (already qualified)
``/contexts/:.:/subjects/s``                    ``/subjects/s`` (the default context)
``/contexts/.ctx/config`` and ``…/mode``        ``/config/:.ctx:`` (the context's own)
``/contexts/.ctx/config/s``                     ``/config/:.ctx:s``
``/contexts/.ctx/schemas/ids/1``                ``/schemas/ids/1?subject=:.ctx:``
``/contexts/.ctx/subjects``, ``…/schemas``      ``?subjectPrefix=:.ctx:`` (each given prefix
                                                qualified unless it names a context or ``:*:``)
==============================================  ==============================================

A context name holding ``:`` is refused with 400, as Confluent does. ``/contexts`` itself and
``/contexts/{ctx}`` alone are left to the routes. Only the first segment is looked at, so a
subject named ``contexts`` (``/subjects/contexts/versions``) is untouched.

The rewrite works on the raw (percent-encoded) path, so a subject holding an encoded ``/``
keeps it, and sets both ``path`` and ``raw_path`` of the ASGI scope before routing. Pure
functions plus a stateless middleware; thread-safe.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, unquote, urlencode

from starlette.types import ASGIApp, Receive, Scope, Send

from sluice.schemas.context import DEFAULT_CONTEXT

_CONTEXT_PREFIX = ":."
_WILDCARD_PREFIX = ":*:"


class InvalidContextError(ValueError):
    """A context in a ``/contexts/{ctx}/`` URL is not a valid context name."""


def context_prefix(context: str) -> str:
    """``".ctx"``, ``"ctx"``, ``":.ctx:"`` → ``":.ctx:"``; the default context → ``""``."""
    name = context[1:] if context.startswith(":") else context
    name = name[:-1] if name.endswith(":") else name
    if ":" in name:
        raise InvalidContextError(f"Context name '{name}' cannot contain a colon")
    if not name.startswith("."):
        name = "." + name
    return "" if name == DEFAULT_CONTEXT else f":{name}:"


def _names_context(value: str) -> bool:
    decoded = unquote(value)
    return decoded.startswith(_CONTEXT_PREFIX) or decoded.startswith(_WILDCARD_PREFIX)


def rewrite(raw_path: str, query: str) -> tuple[str, str] | None:
    """The ``(raw path, query)`` a ``/contexts/{ctx}/…`` request is served as; ``None`` when
    the path has no context prefix to apply. Raises :class:`InvalidContextError`."""
    segments = raw_path.strip("/").split("/")
    if len(segments) < 3 or segments[0] != "contexts":
        return None
    prefix = context_prefix(unquote(segments[1]))
    out: list[str] = []
    subject_next = root_config_or_mode = False
    for index, segment in enumerate(segments[2:]):
        if subject_next:
            if not _names_context(segment):
                segment = prefix + segment
            subject_next = False
        elif segment == "subjects" or (index == 0 and segment in ("config", "mode")):
            subject_next = True
            root_config_or_mode = index == 0 and segment != "subjects"
        out.append(segment)
    if root_config_or_mode and subject_next and prefix:
        out.append(prefix)  # /config or /mode alone: the context's own
    path = "/" + "/".join(out)
    return path, _rewrite_query(path, query, prefix)


def _rewrite_query(path: str, query: str, prefix: str) -> str:
    params = parse_qsl(query, keep_blank_values=True)
    if path.startswith("/schemas/ids"):
        subject = next((v for k, v in params if k == "subject"), "")
        if not _names_context(subject):
            params = [(k, v) for k, v in params if k != "subject"]
            params.append(("subject", prefix + subject))
    elif path in ("/schemas", "/subjects"):
        prefixes = [v for k, v in params if k == "subjectPrefix"] or [""]
        params = [(k, v) for k, v in params if k != "subjectPrefix"]
        params += [("subjectPrefix", p if _names_context(p) else prefix + p) for p in prefixes]
    return urlencode(params, safe=":*.")


class ContextPrefix:
    """ASGI middleware applying :func:`rewrite` before the router sees the request."""

    def __init__(self, app: ASGIApp, *, content_type: str) -> None:
        self.app = app
        self.content_type = content_type

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw = scope.get("raw_path") or scope["path"].encode()
            try:
                rewritten = rewrite(raw.decode("latin-1"), scope["query_string"].decode("latin-1"))
            except InvalidContextError as e:
                await self._refuse(send, str(e))
                return
            if rewritten is not None:
                raw_path, query = rewritten
                scope = dict(scope)
                scope["raw_path"] = raw_path.encode("latin-1")
                scope["path"] = unquote(raw_path)
                scope["query_string"] = query.encode("latin-1")
        await self.app(scope, receive, send)

    async def _refuse(self, send: Send, message: str) -> None:
        body = json.dumps({"error_code": 400, "message": message}).encode()
        headers = [
            (b"content-type", self.content_type.encode()),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({"type": "http.response.start", "status": 400, "headers": headers})
        await send({"type": "http.response.body", "body": body})
