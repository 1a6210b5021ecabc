"""A fuzz of the SASL frames: random bytes in SaslAuthenticate, requests in the wrong order,
oversized frames and garbage before authentication. Each bad connection is answered or
closed; the broker keeps serving the others, and nothing it logs carries a token."""

from __future__ import annotations

import random
import socket
from typing import Any

import pytest

from sluice.broker.protocol import ApiKey, encode_request
from sluice.broker.protocol.apis import request_type
from sluice.broker.protocol.build import build
from sluice.broker.security.plain import encode_plain_message
from tests.broker.security_wiring.conftest import (
    ALICE_PASSWORD,
    PLAIN_JAAS,
    SecureBroker,
    StartSecure,
    recv_exactly,
)
from tests.broker.security_wiring.test_sasl import closed, exchange

pytestmark = pytest.mark.broker
MAX_RECEIVE = 4096


@pytest.fixture
def fuzzed(start_secure: StartSecure) -> SecureBroker:
    return start_secure(
        "SASL_PLAINTEXT",
        {
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "sasl.jaas.config": PLAIN_JAAS,
            "sasl.server.max.receive.size": str(MAX_RECEIVE),
        },
    )


def healthy(broker: SecureBroker) -> None:
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        assert int(exchange(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}).error_code) == 0
        token = encode_plain_message("alice", ALICE_PASSWORD)
        answer = exchange(sock, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": token})
        assert int(answer.error_code) == 0
        assert exchange(sock, ApiKey.METADATA, 1, {"topics": None}).brokers


def frame(api_key: int, version: int, values: dict[str, Any]) -> bytes:
    return encode_request(3, "fuzz", build(request_type(api_key, version), values))


def test_random_tokens_wrong_order_and_huge_frames(fuzzed: SecureBroker) -> None:
    rng = random.Random(19)
    secrets_sent: list[bytes] = []
    for round_ in range(60):
        with socket.create_connection(("127.0.0.1", fuzzed.port), timeout=10) as sock:
            case = round_ % 5
            if case == 0:  # random bytes as the token of each mechanism
                mechanism = rng.choice(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
                exchange(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
                token = rng.randbytes(rng.randrange(0, 600))
                secrets_sent.append(token)
                answer = exchange(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
                assert int(answer.error_code) in (0, 58)
            elif case == 1:  # SaslAuthenticate first: ILLEGAL_SASL_STATE, then closed
                answer = exchange(sock, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"x"})
                assert int(answer.error_code) == 34
                assert closed(sock)
            elif case == 2:  # a size prefix beyond sasl.server.max.receive.size
                sock.sendall((MAX_RECEIVE + 1 + rng.randrange(1 << 30)).to_bytes(4, "big"))
                assert closed(sock)
            elif case == 3:  # a random frame body
                body = rng.randbytes(rng.randrange(1, 200))
                sock.sendall(len(body).to_bytes(4, "big") + body)
                assert closed(sock)
            else:  # handshake twice
                exchange(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
                again = exchange(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
                assert int(again.error_code) == 34
                assert closed(sock)
        if round_ % 10 == 9:
            healthy(fuzzed)
    healthy(fuzzed)
    output = fuzzed.output()
    assert ALICE_PASSWORD not in output
    assert "internal error" not in output, output[-3000:]


def test_a_legacy_token_too_big_closes(fuzzed: SecureBroker) -> None:
    with socket.create_connection(("127.0.0.1", fuzzed.port), timeout=10) as sock:
        exchange(sock, ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "SCRAM-SHA-256"})
        sock.sendall((MAX_RECEIVE * 4).to_bytes(4, "big") + b"n,,n=")
        assert closed(sock)
    with socket.create_connection(("127.0.0.1", fuzzed.port), timeout=10) as sock:
        exchange(sock, ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
        token = encode_plain_message("alice", "wrong")
        sock.sendall(len(token).to_bytes(4, "big") + token)
        assert closed(sock)  # a refused legacy token: closed without a word
    with (
        pytest.raises(ValueError),  # Metadata before authentication: closed, no answer
        socket.create_connection(("127.0.0.1", fuzzed.port), timeout=10) as sock,
    ):
        sock.sendall(frame(ApiKey.METADATA, 1, {"topics": None}))
        recv_exactly(sock, 4)
    healthy(fuzzed)
