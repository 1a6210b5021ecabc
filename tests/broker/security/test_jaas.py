"""broker/security/jaas.py: which key a broker's or a client's JAAS line is read from."""

from __future__ import annotations

import pytest

from sluice.broker.security.jaas import jaas_config_for_client, jaas_config_for_listener
from sluice.common.jaas import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE, JaasConfigError

PLAIN_LINE = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="s3cr3t" user_admin="s3cr3t" user_alice="a-pass";'
)


def test_listener_key_first_then_bare_key() -> None:
    props = {
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_LINE,
        "sasl.jaas.config": f"{SCRAM_LOGIN_MODULE} required username=u password=p;",
    }
    found = jaas_config_for_listener(props, "SASL_SSL", "PLAIN")
    assert found is not None
    assert found.key == "listener.name.sasl_ssl.plain.sasl.jaas.config"
    assert found.entry.login_module == PLAIN_LOGIN_MODULE
    fallback = jaas_config_for_listener(props, "INTERNAL", "SCRAM-SHA-256")
    assert fallback is not None and fallback.key == "sasl.jaas.config"
    assert jaas_config_for_listener({}, "X", "PLAIN") is None
    client = jaas_config_for_client(props)
    assert client is not None and client.entry.username == "u"
    assert jaas_config_for_client({"sasl.jaas.config": "  "}) is None


def test_error_from_a_key_names_the_key() -> None:
    with pytest.raises(JaasConfigError, match=r"^sasl.jaas.config: expected ';'"):
        jaas_config_for_client({"sasl.jaas.config": "M required a=b"})


def test_error_from_a_listener_key_names_that_key() -> None:
    props = {"listener.name.internal.plain.sasl.jaas.config": "M required a=b"}
    with pytest.raises(
        JaasConfigError, match=r"^listener.name.internal.plain.sasl.jaas.config: expected ';'"
    ):
        jaas_config_for_listener(props, "INTERNAL", "PLAIN")
