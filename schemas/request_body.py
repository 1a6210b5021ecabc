"""ASGI middleware bounding the size of request bodies before they are buffered.

What Confluent's registry does with Jetty's ``SizeLimitHandler``
(``size.limit.filter.max.request.body.size``), in two steps:

1. A request whose ``Content-Length`` is over the limit is answered ``413`` at once, before a
   byte of its body is read: the handler never runs, and the server discards the body as it
   arrives (uvicorn reads and drops the rest of a request whose response is complete) instead
   of holding it.
2. Any other body (chunked, or with a lying or absent ``Content-Length``) is counted as the
   handler receives it; the chunk that takes the count over the limit raises
   :class:`~sluice.schemas.errors.RequestTooLargeError` inside the handler's read, which the
   application's error handler turns into the same ``413``. At most the limit plus one chunk
   (the server's read size, 64 KiB for uvicorn) is ever in memory.

Each request gets its own counter; the middleware holds no state between requests.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sluice.schemas.errors import RequestTooLargeError
from sluice.schemas.limits import MAX_BODY_SIZE_KEY


class BodySizeLimit:
    """Wrap ``app`` so that no request body over ``max_bytes`` reaches it whole."""

    def __init__(self, app: ASGIApp, max_bytes: int, content_type: str) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.content_type = content_type

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(send, f"Request body of {declared} bytes is too large")
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise RequestTooLargeError(self._message("Request body is too large"))
            return message

        await self.app(scope, counted, send)

    def _message(self, what: str) -> str:
        return f"{what}: the limit is {MAX_BODY_SIZE_KEY}={self.max_bytes} bytes"

    async def _refuse(self, send: Send, what: str) -> None:
        error = RequestTooLargeError(self._message(what))
        body = json.dumps(error.to_json()).encode()
        await send(
            {
                "type": "http.response.start",
                "status": error.http_status,
                "headers": [
                    (b"content-type", self.content_type.encode("latin-1")),
                    (b"content-length", str(len(body)).encode("latin-1")),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    """The declared body length, or ``None`` when absent or not a number (then counted)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            if not (text.isascii() and text.isdigit()):
                return None
            # int() refuses over 4,300 digits; anything over 18 digits is over any limit.
            return int(text) if len(text) <= 18 else 10**18
    return None
