"""``respond``: one description of a response, shaped for the request's version and encoded;
and ``NO_TOPIC_ID``, what a response's topic id is where there is no topic."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from sluice.broker.protocol import Request, encode_response
from sluice.broker.protocol.apis import response_type
from sluice.broker.protocol.build import build

#: the id a topic entry carries when there is no topic (Kafka's Uuid.ZERO_UUID)
NO_TOPIC_ID = uuid.UUID(int=0)


def respond(request: Request, values: Mapping[str, Any]) -> bytes:
    cls = response_type(request.api_key, request.api_version)
    return encode_response(request.header, build(cls, values))
