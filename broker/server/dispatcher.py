"""``RequestDispatcher``: one request frame in, its handler run, its encoded response out
(Kafka's ``KafkaApis.handle``).

What it does with a frame: decode it (``sluice.broker.protocol``), look its API key up in the
broker's handlers (``ctx.handlers``: ``sluice.broker.server.handlers.HANDLERS`` plus the SASL
keys), refuse a cluster API the principal may not use (``authorization.cluster_denied``), run
the handler, and record the request's latency under the API's name (``BrokerMetrics``).

Errors: an ApiVersions request of a version this broker does not know is answered with
UNSUPPORTED_VERSION and the versions it does (KIP-511: the client retries with one it can
use); any other unknown version, or an API key no handler serves, raises
``UnsupportedVersion`` — a ``RemoteProtocolError``, which closes that one connection (the
peer sent what no supported client sends). Per-partition failures are the handlers' to map
to error codes (``sluice.broker.server.error_mapping``); what escapes a handler closes the
connection and is logged by it (``sluice.broker.server.connection``).

Thread-safety: none needed; used from the connections' tasks on the broker's event loop only.
It holds no state of its own besides the context and the metrics.
"""

from __future__ import annotations

import time
from typing import Final

from sluice.broker.protocol import (
    ApiKey,
    UnsupportedVersion,
    decode_request,
    encode_unsupported_version,
)
from sluice.broker.server.authorization import cluster_denied
from sluice.broker.server.context import BrokerContext, Response
from sluice.broker.server.metrics import BrokerMetrics
from sluice.broker.server.sasl_session import SASL_AUTHENTICATE, SASL_HANDSHAKE

#: Every API's name as metrics and logs spell it (``produce``, ``sasl_handshake``, ...).
API_NAMES: Final[dict[int, str]] = {int(key): key.name.lower() for key in ApiKey}
API_NAMES.update({SASL_HANDSHAKE: "sasl_handshake", SASL_AUTHENTICATE: "sasl_authenticate"})


class RequestDispatcher:
    """Runs one request frame through its handler. See the module docstring."""

    def __init__(self, ctx: BrokerContext, metrics: BrokerMetrics) -> None:
        self._ctx = ctx
        self._metrics = metrics

    async def handle_frame(self, frame: bytes | bytearray | memoryview) -> Response:
        """Decode one request, run its handler, return the encoded response (None: none).
        Raises ``UnsupportedVersion`` for a version or an API key this broker does not serve
        (except ApiVersions, which is answered)."""
        try:
            request = decode_request(frame)
        except UnsupportedVersion as exc:
            if exc.api_key == ApiKey.API_VERSIONS:
                return encode_unsupported_version(exc)
            raise
        handler = self._ctx.handlers.get(request.api_key)
        if handler is None:
            raise UnsupportedVersion(
                request.api_key, request.api_version, request.correlation_id,
                f"api key {request.api_key} is not handled by this broker",
            )  # fmt: skip
        started = time.perf_counter()
        # An API of the cluster the principal may not use is refused before its handler runs.
        denied = cluster_denied(self._ctx, request)
        response = denied if denied is not None else await handler(self._ctx, request)
        self._metrics.record_request(API_NAMES[request.api_key], time.perf_counter() - started)
        return response
