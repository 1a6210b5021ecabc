"""No secret in an exception's message, repr, args or chained cause, nor in a log line.

Secrets are drawn by Hypothesis and pushed through every failure path that handles them:
malformed JAAS lines, PLAIN messages, SCRAM exchanges, stored credentials, TLS key passwords.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sluice.broker.security.client import (
    INTER_BROKER_MECHANISM_KEY,
    SaslClientExchange,
    SaslLogin,
    inter_broker_security,
)
from sluice.broker.security.errors import SecurityError
from sluice.broker.security.plain import PlainAuthenticator, encode_plain_message
from sluice.broker.security.scram import ScramClient, ScramServer
from sluice.broker.security.scram_credential import (
    ScramMechanism,
    create_credential,
    credential_from_string,
    credential_to_string,
)
from sluice.common.jaas import JaasConfigError, parse_jaas_config

# Long enough and odd enough never to occur by chance in a message.
secrets = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="\"'\\,=;/"),
    min_size=12,
    max_size=30,
).map(lambda s: "S3cr3t" + s)


def assert_hidden(
    secret: str, action: Callable[[], object], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.clear()
    with caplog.at_level(logging.DEBUG), pytest.raises((SecurityError, JaasConfigError)) as caught:
        action()
    exc = caught.value
    seen = [str(exc), repr(exc), *map(repr, exc.args)]
    assert all(secret not in text for text in seen), seen
    # a chained exception would be printed with the traceback
    assert exc.__cause__ is None and (exc.__suppress_context__ or exc.__context__ is None)
    assert all(secret not in record.getMessage() for record in caplog.records)


SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@SETTINGS
@given(secret=secrets)
def test_jaas_errors(secret: str, caplog: pytest.LogCaptureFixture) -> None:
    for line in (
        f"M required password={secret}",
        f'M required password="{secret}" user_x "{secret}";',
        f"M {secret};",
        f"{secret} required password",
        f"M required password= = {secret};",
        f"M required a=b {secret};",
    ):
        assert_hidden(secret, lambda line=line: parse_jaas_config(line), caplog)


@SETTINGS
@given(secret=secrets, other=secrets)
def test_plain_failures(secret: str, other: str, caplog: pytest.LogCaptureFixture) -> None:
    assume(secret != other)
    authenticator = PlainAuthenticator({"alice": other})
    for message in (
        encode_plain_message("alice", secret),
        encode_plain_message("bob", secret),
        encode_plain_message("alice", other, authzid="bob"),
        f"\x00alice\x00{secret}\x00x".encode(),
        f"\x00\x00{secret}".encode(),
        b"\x00alice\x00" + secret.encode() + b"\xff",
    ):
        assert_hidden(secret, lambda m=message: authenticator.authenticate(m), caplog)
        assert_hidden(other, lambda m=message: authenticator.authenticate(m), caplog)


@SETTINGS
@given(secret=secrets)
def test_scram_failures(secret: str, caplog: pytest.LogCaptureFixture) -> None:
    mechanism = ScramMechanism.SCRAM_SHA_256
    credential = create_credential(mechanism, secret)
    for password in (secret[::-1], secret):
        server = ScramServer(mechanism, {"alice": credential}.get)
        client = ScramClient(mechanism, "alice", password)
        final = client.final_message(server.receive(client.first_message()))
        if password == secret:
            final = final[:-6] + b"AAAA=="  # a proof that does not match
        assert_hidden(secret, lambda f=final, s=server: s.receive(f), caplog)
    stored = credential_to_string(credential)
    broken = stored.replace("iterations=4096", "iterations=12")
    assert_hidden(stored.split(",")[1], lambda: credential_from_string(mechanism, broken), caplog)


@SETTINGS
@given(secret=secrets, other=secrets)
def test_inter_broker_login_failures(
    secret: str, other: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The inter-broker client's refusals: its config, the other broker's answer, a server
    that does not hold the credential."""
    assume(secret != other)
    jaas = "listener.name.b.plain.sasl.jaas.config"
    for props in (
        {INTER_BROKER_MECHANISM_KEY: "PLAIN", jaas: f'M required password="{secret}";'},
        {INTER_BROKER_MECHANISM_KEY: "PLAIN", jaas: f'M required username="{secret}" x;'},
        {INTER_BROKER_MECHANISM_KEY: secret, jaas: f'M required password="{secret}";'},
        {"sasl.jaas.config": f'M required username="u" password="{secret}";'},
    ):
        assert_hidden(
            secret, lambda p=props: inter_broker_security(p, "B", "SASL_PLAINTEXT"), caplog
        )
    mechanism = ScramMechanism.SCRAM_SHA_512
    forged = ScramServer(mechanism, lambda _name: create_credential(mechanism, other))
    honest = ScramServer(mechanism, lambda _name: create_credential(mechanism, secret))
    client = SaslClientExchange(SaslLogin("SCRAM-SHA-512", "broker", secret))
    impostor = SaslClientExchange(SaslLogin("SCRAM-SHA-512", "broker", other))
    final = client.respond(honest.receive(client.first_token()))
    forged_final = impostor.respond(forged.receive(impostor.first_token()))
    assert final is not None and forged_final is not None
    honest.receive(final)
    server_final = forged.receive(forged_final)
    assert_hidden(secret, lambda: client.respond(server_final), caplog)
    wrong = PlainAuthenticator({"broker": other})
    plain = SaslClientExchange(SaslLogin("PLAIN", "broker", secret))
    assert_hidden(secret, lambda: wrong.authenticate(plain.first_token()), caplog)
