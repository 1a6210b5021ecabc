"""The client half of inter-broker security: settings read as Kafka's inter-broker client
reads them, refusals naming the key, and the SASL exchange driven against the server side's
own state machines (``PlainAuthenticator``, ``ScramServer``)."""

from __future__ import annotations

import pytest

from sluice.broker.security.client import (
    InterBrokerAuthenticationError,
    InterBrokerConfigError,
    SaslClientExchange,
    SaslLogin,
    UnsupportedSaslMechanismError,
    check_authenticate,
    check_handshake,
    inter_broker_security,
)
from sluice.broker.security.errors import SaslAuthenticationError
from sluice.broker.security.plain import PlainAuthenticator
from sluice.broker.security.scram import ScramServer
from sluice.broker.security.scram_credential import ScramMechanism, create_credential
from sluice.common.jaas import JaasConfigError

PASSWORD = "b-pw-8812"
SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    f'username="broker" password="{PASSWORD}";'
)
TLS = {"ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem"}


def test_sasl_ssl_reads_the_listener_keys_first() -> None:
    props = {
        **TLS,
        "listener.name.internal.ssl.truststore.location": "/internal-ca.pem",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "sasl.jaas.config": SCRAM_JAAS.replace(PASSWORD, "other"),
    }
    security = inter_broker_security(props, "INTERNAL", "SASL_SSL", ["SCRAM-SHA-512"])
    assert security.tls_properties is not None
    assert security.tls_properties["ssl.truststore.location"] == "/internal-ca.pem"
    assert security.sasl == SaslLogin(
        "SCRAM-SHA-512", "broker", PASSWORD,
        "listener.name.internal.scram-sha-512.sasl.jaas.config",
    )  # fmt: skip
    assert PASSWORD not in repr(security)


def test_plaintext_and_ssl_need_no_login() -> None:
    assert inter_broker_security({}, "PLAINTEXT", "PLAINTEXT").sasl is None
    ssl_only = inter_broker_security(TLS, "SSL", "SSL")
    assert ssl_only.uses_tls and ssl_only.sasl is None


@pytest.mark.parametrize(
    ("props", "protocol", "key"),
    [
        ({}, "SSL", "ssl.truststore.location"),
        ({"sasl.jaas.config": SCRAM_JAAS}, "SASL_PLAINTEXT",
         "sasl.mechanism.inter.broker.protocol"),
        ({"sasl.mechanism.inter.broker.protocol": "GSSAPI"}, "SASL_PLAINTEXT",
         "sasl.mechanism.inter.broker.protocol"),
        ({"sasl.mechanism.inter.broker.protocol": "PLAIN"}, "SASL_PLAINTEXT",
         "listener.name.b.plain.sasl.jaas.config"),
        ({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
          "sasl.jaas.config": 'M required username="broker";'}, "SASL_PLAINTEXT",
         "sasl.jaas.config"),
    ],
)  # fmt: skip
def test_refusals_name_the_key(props: dict[str, str], protocol: str, key: str) -> None:
    with pytest.raises(InterBrokerConfigError, match=f"^{key}"):
        inter_broker_security(props, "B", protocol)


def test_a_mechanism_the_listener_does_not_enable_is_refused() -> None:
    props = {"sasl.mechanism.inter.broker.protocol": "PLAIN", "sasl.jaas.config": SCRAM_JAAS}
    with pytest.raises(InterBrokerConfigError, match="SCRAM-SHA-256"):
        inter_broker_security(props, "B", "SASL_PLAINTEXT", ["SCRAM-SHA-256"])


def test_a_broken_jaas_line_is_a_jaas_error() -> None:
    props = {"sasl.mechanism.inter.broker.protocol": "PLAIN", "sasl.jaas.config": "M required"}
    with pytest.raises(JaasConfigError, match="sasl.jaas.config"):
        inter_broker_security(props, "B", "SASL_PLAINTEXT")


def test_plain_exchange_against_the_server() -> None:
    server = PlainAuthenticator({"broker": PASSWORD})
    exchange = SaslClientExchange(SaslLogin("PLAIN", "broker", PASSWORD))
    assert server.authenticate(exchange.first_token()) == "broker"
    assert exchange.respond(b"") is None and exchange.complete
    wrong = SaslClientExchange(SaslLogin("PLAIN", "broker", "nope"))
    with pytest.raises(SaslAuthenticationError):
        server.authenticate(wrong.first_token())


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_scram_exchange_against_the_server(mechanism: ScramMechanism) -> None:
    credential = create_credential(mechanism, PASSWORD)
    server = ScramServer(mechanism, lambda name: credential if name == "broker" else None)
    exchange = SaslClientExchange(SaslLogin(mechanism.mechanism_name, "broker", PASSWORD))
    final = exchange.respond(server.receive(exchange.first_token()))
    assert final is not None
    assert exchange.respond(server.receive(final)) is None
    assert exchange.complete and server.username == "broker"


def test_scram_refuses_a_server_without_the_credential() -> None:
    mechanism = ScramMechanism.SCRAM_SHA_256
    impostor = create_credential(mechanism, "another-password")
    honest = create_credential(mechanism, PASSWORD)
    server = ScramServer(mechanism, lambda _name: honest)
    exchange = SaslClientExchange(SaslLogin("SCRAM-SHA-256", "broker", PASSWORD))
    final = exchange.respond(server.receive(exchange.first_token()))
    assert final is not None
    server.receive(final)
    # a server final message signed with another key: the client must not accept it
    forged = ScramServer(mechanism, lambda _name: impostor)
    other = SaslClientExchange(SaslLogin("SCRAM-SHA-256", "broker", "another-password"))
    forged_final = other.respond(forged.receive(other.first_token()))
    assert forged_final is not None
    with pytest.raises(InterBrokerAuthenticationError, match="SCRAM"):
        exchange.respond(forged.receive(forged_final))


def test_answers_of_the_other_broker() -> None:
    check_handshake("PLAIN", 0, ["PLAIN"], "b")
    with pytest.raises(UnsupportedSaslMechanismError, match="expected the listener to enable"):
        check_handshake("PLAIN", 33, ["SCRAM-SHA-256"], "b")
    check_authenticate(0, None, "b", "broker")
    with pytest.raises(InterBrokerAuthenticationError, match="Invalid username or password"):
        check_authenticate(58, "Authentication failed: Invalid username or password", "b", "u")
