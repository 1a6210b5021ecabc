"""plain.py: RFC 4616 messages and Kafka's PlainSaslServer rules, with kafka-python's bytes."""

from __future__ import annotations

import warnings

import pytest

from sluice.broker.security.errors import SaslAuthenticationError, SaslError, SaslMessageError
from sluice.broker.security.plain import (
    PlainAuthenticator,
    encode_plain_message,
    parse_plain_message,
)
from sluice.common.jaas import parse_jaas_config

with warnings.catch_warnings():
    # kafka-python loads its JSON schemas with deprecated importlib.resources calls.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.net.sasl.plain import SaslMechanismPlain

USERS = {"admin": "admin-secret", "alice": "alice-secret", "ünï": "pässwörd"}


@pytest.fixture
def authenticator() -> PlainAuthenticator:
    return PlainAuthenticator(USERS)


def test_accepts_empty_or_equal_authzid(authenticator: PlainAuthenticator) -> None:
    assert authenticator.authenticate(b"\x00alice\x00alice-secret") == "alice"
    assert authenticator.authenticate(b"alice\x00alice-secret".join([b"alice\x00", b""])) == (
        "alice"
    )
    assert authenticator.authenticate(encode_plain_message("ünï", "pässwörd")) == "ünï"


def test_kafka_python_client_bytes(authenticator: PlainAuthenticator) -> None:
    client = SaslMechanismPlain(sasl_plain_username="admin", sasl_plain_password="admin-secret")
    assert authenticator.authenticate(client.auth_bytes()) == "admin"


def test_users_from_a_jaas_line() -> None:
    entry = parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="a" user_admin="a" user_bob="b";'
    )
    authenticator = PlainAuthenticator(entry.plain_users)
    assert authenticator.authenticate(encode_plain_message("bob", "b")) == "bob"


@pytest.mark.parametrize(
    "message",
    [
        b"\x00alice\x00wrong",
        b"\x00nobody\x00alice-secret",
        b"\x00alice\x00alice-secre",
        b"\x00alice\x00alice-secretX",
        b"\x00ALICE\x00alice-secret",
    ],
)
def test_wrong_password_and_unknown_user_fail_alike(
    authenticator: PlainAuthenticator, message: bytes
) -> None:
    with pytest.raises(SaslAuthenticationError) as caught:
        authenticator.authenticate(message)
    assert str(caught.value) == "Authentication failed: Invalid username or password"
    assert caught.value.code.value == 58


def test_foreign_authzid_refused(authenticator: PlainAuthenticator) -> None:
    with pytest.raises(SaslAuthenticationError, match="authorization id that is different"):
        authenticator.authenticate(b"admin\x00alice\x00alice-secret")


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (b"", "expected 3 tokens, got 1"),
        (b"alice\x00alice-secret", "expected 3 tokens, got 2"),
        (b"\x00a\x00b\x00c", "expected 3 tokens, got 4"),
        (b"\x00\x00pw", "username not specified"),
        (b"\x00alice\x00", "password not specified"),
        (b"\x00alice\x00\xff\xfe", "not UTF-8"),
    ],
)
def test_malformed_messages(authenticator: PlainAuthenticator, message: bytes, error: str) -> None:
    with pytest.raises(SaslMessageError, match=error):
        authenticator.authenticate(message)


def test_parse_and_encode_round_trip_and_repr_hides_password() -> None:
    message = parse_plain_message(encode_plain_message("u", "top-secret", authzid="u"))
    assert (message.authzid, message.username, message.password) == ("u", "u", "top-secret")
    assert "top-secret" not in repr(message)
    assert "secret" not in repr(PlainAuthenticator(USERS))
    with pytest.raises(ValueError, match="NUL"):
        encode_plain_message("u\x00", "p")


def test_every_failure_is_a_sasl_error_without_the_password(
    authenticator: PlainAuthenticator,
) -> None:
    for message in (b"\x00alice\x00guess-me-123", b"bob\x00alice\x00guess-me-123"):
        with pytest.raises(SaslError) as caught:
            authenticator.authenticate(message)
        assert "guess-me-123" not in str(caught.value) + repr(caught.value)
