"""Confluent's client keys for the registry client: credentials sources and TLS."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.schemas.client import RegistryClient
from sluice.schemas.client_config import RegistryClientConfig
from sluice.schemas.errors import RegistrySecurityConfigError
from sluice.testing.certificates import Certificates, make_certificates

SECRET = "pa:ss@w0rd%"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("client-tls"), "unused-pw")


@pytest.mark.parametrize("prefix", ["", "schema.registry."])
def test_user_info(prefix: str) -> None:
    config = RegistryClientConfig.from_config(
        {
            f"{prefix}url": "https://registry:8081/",
            f"{prefix}basic.auth.credentials.source": "USER_INFO",
            f"{prefix}basic.auth.user.info": f"alice:{SECRET}",
        }
    )
    assert config.url == "https://registry:8081"
    assert config.basic_auth == ("alice", SECRET)
    assert SECRET not in repr(config)


def test_user_info_without_source_key_is_user_info() -> None:
    config = RegistryClientConfig.from_config(
        {"url": "http://r:1", "basic.auth.user.info": "alice:x"}
    )
    assert config.basic_auth == ("alice", "x")


def test_url_source_takes_the_url_user_info_and_strips_it() -> None:
    config = RegistryClientConfig.from_config(
        {"schema.registry.url": "https://alice:pa%3Ass%40w0rd%25@registry:8081"}
    )
    assert config.basic_auth == ("alice", SECRET)
    assert config.url == "https://registry:8081"
    client = RegistryClient("http://bob:pw@127.0.0.1:1/")
    assert client.url == "http://127.0.0.1:1"


def test_prefixed_key_wins() -> None:
    config = RegistryClientConfig.from_config(
        {"url": "http://bare:1", "schema.registry.url": "http://prefixed:2"}
    )
    assert config.url == "http://prefixed:2"


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ({}, "expected the registry's URL"),
        ({"url": "http://a:1,http://b:2"}, "expected one URL"),
        ({"url": "http://r:1", "basic.auth.credentials.source": "SASL_INHERIT"}, "SASL_INHERIT"),
        ({"url": "http://r:1", "basic.auth.credentials.source": "TOKEN"}, "expected URL or"),
        ({"url": "http://r:1", "basic.auth.credentials.source": "USER_INFO"}, "needs basic.auth"),
        ({"url": "http://r:1", "basic.auth.user.info": SECRET.replace(":", "")}, "not shown"),
        (
            {
                "url": "http://r:1",
                "basic.auth.credentials.source": "URL",
                "basic.auth.user.info": f"a:{SECRET}",
            },
            "=URL ignores it",
        ),  # fmt: skip
        (
            {"url": f"http://a:{SECRET}@r:1", "basic.auth.user.info": f"a:{SECRET}"},
            "both in the registry URL and as basic.auth.user.info",
        ),
        ({"url": "http://r:1", "bearer.auth.credentials.source": "STATIC_TOKEN"}, "bearer"),
        ({"url": "http://r:1", "ssl.key.location": "/k.pem"}, "ssl.certificate.location is"),
    ],
)
def test_refused_without_a_secret(conf: dict[str, str], expected: str) -> None:
    with pytest.raises(RegistrySecurityConfigError, match=expected) as e:
        RegistryClientConfig.from_config(conf)
    assert SECRET not in str(e.value) and SECRET.replace(":", "") not in str(e.value)


def test_tls_keys(certs: Certificates) -> None:
    config = RegistryClientConfig.from_config(
        {
            "schema.registry.url": "https://127.0.0.1:1",
            "schema.registry.ssl.ca.location": str(certs.ca),
            "schema.registry.ssl.certificate.location": str(certs.client_certificate),
            "schema.registry.ssl.key.location": str(certs.client_key),
        }
    )
    assert config.ssl_context is not None and config.ssl_context.check_hostname
    assert RegistryClientConfig.from_config({"url": "https://r:1"}).ssl_context is None


def test_unreachable_error_never_shows_the_password(tmp_path: Path) -> None:
    from sluice.schemas.errors import RegistryConnectionError

    client = RegistryClient.from_config(
        {"url": "http://127.0.0.1:9", "basic.auth.user.info": f"alice:{SECRET}"}, timeout=2
    )
    with pytest.raises(RegistryConnectionError) as e:
        client.subjects()
    assert SECRET not in str(e.value) and "alice" not in str(e.value)
