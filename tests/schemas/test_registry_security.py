"""The registry over HTTPS with HTTP Basic authentication, as real processes on 127.0.0.1.

Each registry is ``python -m sluice registry start --config F`` with a properties file written
here in Confluent's terms (PEM keystore, JAAS file, Jetty users file); certificates are made
for the test (:mod:`sluice.testing.certificates`). Checked with Sluice's client and serde and
with confluent-kafka's ``SchemaRegistryClient``, serializer and deserializer; the registry's
log (at debug, access log on) is searched for every secret used.
"""

from __future__ import annotations

import base64
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer as ConfluentDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer as ConfluentSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from sluice.schemas.client import RegistryClient
from sluice.schemas.errors import RegistryConnectionError, UnauthorizedError
from sluice.schemas.serde import AvroDeserializer, AvroSerializer
from sluice.schemas.tls import client_context
from sluice.testing.certificates import Certificates, make_certificates
from sluice.testing.registry import RegistryProcess

REALM = "SchemaRegistry-Props"
ALICE_PASSWORD = "alice-Pw-7c1e9"
WRONG_PASSWORD = "guess-Pw-55d0a"
KEY_PASSWORD = "server-key-Pw-0b3f"
SECRETS = (
    ALICE_PASSWORD,
    WRONG_PASSWORD,
    KEY_PASSWORD,
    base64.b64encode(f"alice:{ALICE_PASSWORD}".encode()).decode(),
    base64.b64encode(f"alice:{WRONG_PASSWORD}".encode()).decode(),
)
SCHEMA = (
    '{"type": "record", "name": "PageView", "namespace": "sluice.test", "fields": '
    '[{"name": "url", "type": "string"}, {"name": "ms", "type": "long"}]}'
)


class SecureRegistry(RegistryProcess):
    """A registry whose config is a properties file (``--config``) and whose listener is
    https; ready when a TLS request gets any HTTP answer (401 included)."""

    def __init__(self, base: Path, properties: dict[str, str], probe: ssl.SSLContext) -> None:
        super().__init__(base / "data", base / "registry.log")
        self.url = f"https://127.0.0.1:{self.port}"
        self.config = base / "registry.properties"
        lines = [f"{key}={value}" for key, value in properties.items()]
        self.config.write_text("\n".join(lines) + "\n", encoding="utf-8")
        self.probe = probe

    def command(self) -> list[str]:
        return [*super().command(), "--config", str(self.config)]

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/", timeout=1, context=self.probe):
                return True
        except urllib.error.HTTPError as e:
            e.close()
            return True
        except OSError:
            return False


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("registry-tls"), KEY_PASSWORD)


def tls_keys(certs: Certificates) -> dict[str, str]:
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server),
        "ssl.key.password": certs.key_password,
    }


def auth_keys(folder: Path) -> dict[str, str]:
    users = folder / "password-file"
    users.write_text(
        f"alice: {ALICE_PASSWORD},admin\nbob: MD5:639bae9ac6b3e1a84cebb7b403297b79,developer\n"
    )
    jaas = folder / "jaas.conf"
    jaas.write_text(
        f"{REALM} {{\n  org.eclipse.jetty.jaas.spi.PropertyFileLoginModule required\n"
        f'  file="{users}"\n  debug="false";\n}};\n'
    )
    return {
        "authentication.method": "BASIC",
        "authentication.realm": REALM,
        "authentication.roles": "admin,developer",
        "java.security.auth.login.config": str(jaas),
    }


@pytest.fixture(scope="module")
def authed(
    tmp_path_factory: pytest.TempPathFactory, certs: Certificates
) -> Iterator[SecureRegistry]:
    """HTTPS without client certificates, basic auth, debug logging (access log on)."""
    base = tmp_path_factory.mktemp("authed")
    keys = {**tls_keys(certs), **auth_keys(base), "log.level": "debug"}
    process = SecureRegistry(base, keys, client_context(str(certs.ca)))
    with process:
        yield process


@pytest.fixture(scope="module")
def mutual(
    tmp_path_factory: pytest.TempPathFactory, certs: Certificates
) -> Iterator[SecureRegistry]:
    """HTTPS requiring a client certificate signed by the test CA; no basic auth."""
    base = tmp_path_factory.mktemp("mutual")
    keys = {
        **tls_keys(certs),
        "ssl.client.authentication": "REQUIRED",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
    }
    probe = client_context(str(certs.ca), str(certs.client_certificate), str(certs.client_key))
    with SecureRegistry(base, keys, probe) as process:
        yield process


def confluent_conf(registry: SecureRegistry, certs: Certificates, password: str) -> dict[str, str]:
    return {
        "url": registry.url,
        "basic.auth.user.info": f"alice:{password}",
        "ssl.ca.location": str(certs.ca),
    }


def get(
    url: str, context: ssl.SSLContext, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, dict(e.headers), e.read()


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


# -- HTTPS + basic auth -------------------------------------------------------------------------


def test_no_credentials_wrong_password_right_password(
    authed: SecureRegistry, certs: Certificates
) -> None:
    context = client_context(str(certs.ca))
    status, headers, body = get(authed.url + "/subjects", context)
    assert (status, body) == (401, b'{"error_code":401,"message":"Unauthorized"}')
    assert headers["www-authenticate"] == f'Basic realm="{REALM}"'
    status, _, _ = get(authed.url + "/subjects", context, basic("alice", WRONG_PASSWORD))
    assert status == 401
    status, _, body = get(authed.url + "/subjects", context, basic("alice", ALICE_PASSWORD))
    assert status == 200, body
    status, _, _ = get(authed.url + "/subjects", context, basic("bob", "you"))  # MD5: user
    assert status == 200


def test_sluice_client_with_confluent_keys(authed: SecureRegistry, certs: Certificates) -> None:
    conf = {
        "schema.registry.url": authed.url,
        "schema.registry.basic.auth.credentials.source": "USER_INFO",
        "schema.registry.basic.auth.user.info": f"alice:{ALICE_PASSWORD}",
        "schema.registry.ssl.ca.location": str(certs.ca),
    }
    with RegistryClient.from_config(conf) as client:
        schema_id = client.register("sluice-client-value", SCHEMA)
        assert client.get_version("sluice-client-value")["id"] == schema_id
    wrong = {**conf, "schema.registry.basic.auth.user.info": f"alice:{WRONG_PASSWORD}"}
    with pytest.raises(UnauthorizedError) as e:
        RegistryClient.from_config(wrong).subjects()
    assert WRONG_PASSWORD not in str(e.value)
    # the URL credentials source, and the system CAs (which do not know the test CA)
    host = authed.url.removeprefix("https://")
    in_url = RegistryClient(
        f"https://alice:{ALICE_PASSWORD}@{host}", ssl_context=client_context(str(certs.ca))
    )
    assert "sluice-client-value" in in_url.subjects()
    with pytest.raises(RegistryConnectionError, match="CERTIFICATE_VERIFY_FAILED") as e2:
        RegistryClient(f"https://alice:{ALICE_PASSWORD}@{host}").subjects()
    assert ALICE_PASSWORD not in str(e2.value)


def test_plain_http_to_the_https_port_gets_nothing(authed: SecureRegistry) -> None:
    with pytest.raises(RegistryConnectionError):
        RegistryClient(authed.url.replace("https://", "http://"), timeout=5).subjects()


def test_confluent_client_registers_and_fetches(
    authed: SecureRegistry, certs: Certificates
) -> None:
    with SchemaRegistryClient(confluent_conf(authed, certs, ALICE_PASSWORD)) as sr:
        schema_id = sr.register_schema("confluent-value", Schema(SCHEMA, "AVRO"))
        assert sr.get_schema(schema_id).schema_str is not None
        latest = sr.get_latest_version("confluent-value")
        assert (latest.schema_id, latest.version) == (schema_id, 1)
        assert "confluent-value" in sr.get_subjects()
    with SchemaRegistryClient(confluent_conf(authed, certs, WRONG_PASSWORD)) as sr:
        with pytest.raises(SchemaRegistryError) as e:
            sr.get_subjects()
        assert e.value.http_status_code == 401 and e.value.error_code == 401


def test_serde_round_trip_over_https_with_auth(authed: SecureRegistry, certs: Certificates) -> None:
    keys = {
        "schema.registry.url": authed.url,
        "basic.auth.user.info": f"alice:{ALICE_PASSWORD}",
        "schema.registry.ssl.ca.location": str(certs.ca),
    }
    record = {"url": "/index.html", "ms": 1_700_000_000_000}
    data = AvroSerializer(keys, SCHEMA, "serde-value")(record)
    assert AvroDeserializer(keys)(data) == record
    # and Confluent's serde reads what Sluice's wrote, and the other way round
    with SchemaRegistryClient(confluent_conf(authed, certs, ALICE_PASSWORD)) as sr:
        context = SerializationContext("serde", MessageField.VALUE)
        assert ConfluentDeserializer(sr)(data, context) == record
        theirs = ConfluentSerializer(sr, SCHEMA)(record, context)
        assert theirs is not None
        assert AvroDeserializer(keys)(theirs) == record


def test_no_secret_in_the_log(authed: SecureRegistry, certs: Certificates) -> None:
    context = client_context(str(certs.ca))
    get(authed.url + "/subjects", context, basic("alice", WRONG_PASSWORD))
    get(authed.url + "/subjects?x=1", context, basic("alice", ALICE_PASSWORD))
    get(authed.url + "/subjects", context, basic(ALICE_PASSWORD, WRONG_PASSWORD))
    with SchemaRegistryClient(confluent_conf(authed, certs, ALICE_PASSWORD)) as sr:
        sr.get_subjects()
    log = authed.log()
    assert "listening on https://127.0.0.1" in log and "basic authentication" in log
    assert "wrong or unknown credentials" in log
    assert '"GET /subjects?x=1 HTTP/1.1" 200' in log  # the access log is on
    for secret in SECRETS:
        assert secret not in log, f"a secret is in the registry's log:\n{log}"


# -- HTTPS with client certificates ----------------------------------------------------------


def test_client_certificate_required(mutual: SecureRegistry, certs: Certificates) -> None:
    with_cert = client_context(str(certs.ca), str(certs.client_certificate), str(certs.client_key))
    with RegistryClient(mutual.url, ssl_context=with_cert) as client:
        client.register("mtls-value", SCHEMA)
        assert "mtls-value" in client.subjects()
    with pytest.raises(RegistryConnectionError):
        RegistryClient(mutual.url, ssl_context=client_context(str(certs.ca))).subjects()
    conf = {
        "url": mutual.url,
        "ssl.ca.location": str(certs.ca),
        "ssl.certificate.location": str(certs.client_certificate),
        "ssl.key.location": str(certs.client_key),
    }
    with SchemaRegistryClient(conf) as sr:
        subjects = sr.get_subjects()
    assert "mtls-value" in subjects
    assert RegistryClient.from_config(conf).subjects() == subjects


# -- start-up refusals -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"ssl.key.password": WRONG_PASSWORD}, "could not load the private key"),
        ({"ssl.keystore.type": "JKS", "ssl.keystore.password": KEY_PASSWORD}, "expected PEM"),
        ({"authentication.method": "BASIC"}, "needs authentication.realm"),
    ],
)
def test_bad_security_config_stops_start_without_a_secret(
    tmp_path: Path, certs: Certificates, change: dict[str, str], expected: str
) -> None:
    config = tmp_path / "registry.properties"
    keys = {"listeners": "https://127.0.0.1:1", **tls_keys(certs), **change}
    config.write_text("".join(f"{k}={v}\n" for k, v in keys.items()))
    result = subprocess.run(
        [sys.executable, "-m", "sluice", "registry", "start", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0 and expected in output, output
    for secret in SECRETS:
        assert secret not in output
