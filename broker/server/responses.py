"""``respond``: one description of a response, shaped for the request's version and encoded."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sluice.broker.protocol import Request, encode_response
from sluice.broker.protocol.apis import response_type
from sluice.broker.protocol.build import build


def respond(request: Request, values: Mapping[str, Any]) -> bytes:
    cls = response_type(request.api_key, request.api_version)
    return encode_response(request.header, build(cls, values))
