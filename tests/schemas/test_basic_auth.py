"""HTTP Basic authentication: the keys, the JAAS and users files, and every answer."""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from sluice.schemas.app import create_app
from sluice.schemas.basic_auth import BasicAuthenticator
from sluice.schemas.errors import RegistrySecurityConfigError, UsersFileError
from sluice.schemas.file_store import FileSchemaStore
from sluice.schemas.registry import Registry

REALM = "SchemaRegistry-Props"
ALICE_PASSWORD = "alice-pw-0451"
SCHEMA = '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}'


def write_files(tmp_path: Path, module: str = "org.eclipse.jetty.jaas.spi.PropertyFileLoginModule",
                flag: str = "required") -> Path:  # fmt: skip
    users = tmp_path / "password-file"
    users.write_text(
        f"alice: {ALICE_PASSWORD},admin\n"
        "bob: MD5:639bae9ac6b3e1a84cebb7b403297b79,reader\n"  # "you"
    )
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(f'{REALM} {{\n  {module} {flag}\n  file="{users}"\n  debug="false";\n}};\n')
    return jaas


def props(jaas: Path, **more: str) -> dict[str, str]:
    return {
        "authentication.method": "BASIC",
        "authentication.realm": REALM,
        "java.security.auth.login.config": str(jaas),
        **more,
    }


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


@pytest.fixture
def app_client(tmp_path: Path) -> Iterator[TestClient]:
    authenticator = BasicAuthenticator.from_properties(
        props(
            write_files(tmp_path),
            **{"authentication.roles": "admin,developer", "authentication.skip.paths": "/,/mode/*"},
        )  # fmt: skip
    )
    store = FileSchemaStore(tmp_path / "data")
    try:
        app = create_app(Registry(store), authenticator=authenticator)
        with TestClient(app, raise_server_exceptions=False) as client:
            yield client
    finally:
        store.close()


def test_method_none_is_no_authenticator() -> None:
    assert BasicAuthenticator.from_properties({}) is None
    assert BasicAuthenticator.from_properties({"authentication.method": "none"}) is None


def test_jaas_file_from_schema_registry_opts(tmp_path: Path) -> None:
    jaas = write_files(tmp_path)
    keys = props(jaas)
    del keys["java.security.auth.login.config"]
    env = {"SCHEMA_REGISTRY_OPTS": f"-Xmx512m -Djava.security.auth.login.config={jaas}"}
    authenticator = BasicAuthenticator.from_properties(keys, env)
    assert authenticator is not None and len(authenticator.users) == 2
    assert authenticator.roles == frozenset()  # default "*": any authenticated user


@pytest.mark.parametrize("module", [
    "org.eclipse.jetty.jaas.spi.PropertyFileLoginModule",
    "org.eclipse.jetty.security.jaas.spi.PropertyFileLoginModule",
])  # fmt: skip
def test_both_jetty_module_names(tmp_path: Path, module: str) -> None:
    assert BasicAuthenticator.from_properties(props(write_files(tmp_path, module))) is not None


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"authentication.method": "BEARER"}, "BEARER .* is not supported"),
        ({"authentication.method": "DIGEST"}, "expected NONE or BASIC, found 'DIGEST'"),
        ({"authentication.realm": ""}, "needs authentication.realm"),
        ({"authentication.realm": "Other"}, r"expected an entry named 'Other'.*found Schema"),
        ({"authentication.realm": 'a"b'}, "expected a name without quotes"),
        ({"java.security.auth.login.config": ""}, "needs a JAAS file"),
        ({"java.security.auth.login.config": "/absent.conf"}, "no such file"),
    ],
)
def test_refused_keys(tmp_path: Path, change: dict[str, str], expected: str) -> None:
    with pytest.raises(RegistrySecurityConfigError, match=expected):
        BasicAuthenticator.from_properties(props(write_files(tmp_path), **change), {})


@pytest.mark.parametrize(
    ("module", "flag", "expected"),
    [
        ("org.eclipse.jetty.jaas.spi.LdapLoginModule", "required", "found .*LdapLoginModule"),
        ("org.eclipse.jetty.jaas.spi.PropertyFileLoginModule", "optional", "cannot be optional"),
    ],
)
def test_refused_jaas_modules(tmp_path: Path, module: str, flag: str, expected: str) -> None:
    with pytest.raises(RegistrySecurityConfigError, match=expected):
        BasicAuthenticator.from_properties(props(write_files(tmp_path, module, flag)))


def test_users_file_errors_surface(tmp_path: Path) -> None:
    jaas = write_files(tmp_path)
    (tmp_path / "password-file").write_text("carol: CRYPT:me/ks90E221EY\n")
    with pytest.raises(UsersFileError, match="CRYPT: passwords are not supported"):
        BasicAuthenticator.from_properties(props(jaas))


def test_no_credentials_is_401_with_the_realm(app_client: TestClient) -> None:
    response = app_client.get("/subjects")
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == f'Basic realm="{REALM}"'
    assert response.headers["content-type"] == "application/vnd.schemaregistry.v1+json"
    assert response.json() == {"error_code": 401, "message": "Unauthorized"}


@pytest.mark.parametrize(
    "headers",
    [
        basic("alice", "wrong"),
        basic("alice", ALICE_PASSWORD + " "),
        basic("mallory", ALICE_PASSWORD),
        basic("alice", ""),
        {"Authorization": "Basic !!!not-base64"},
        {"Authorization": "Bearer " + ALICE_PASSWORD},
        {"Authorization": "Basic " + base64.b64encode(b"no-colon").decode()},
        {"Authorization": "Basic " + base64.b64encode(b"\xff\xfe:\xff").decode()},
    ],
)
def test_bad_credentials_are_401_alike(app_client: TestClient, headers: dict[str, str]) -> None:
    response = app_client.post(
        "/subjects/s-value/versions", json={"schema": SCHEMA}, headers=headers
    )
    assert response.status_code == 401
    assert response.json() == {"error_code": 401, "message": "Unauthorized"}
    assert app_client.get("/subjects", headers=basic("alice", ALICE_PASSWORD)).json() == []


def test_right_password_is_served(app_client: TestClient) -> None:
    alice = basic("alice", ALICE_PASSWORD)
    response = app_client.post("/subjects/s-value/versions", json={"schema": SCHEMA}, headers=alice)
    assert response.status_code == 200, response.text
    assert app_client.get("/subjects", headers=alice).json() == ["s-value"]
    # unknown routes need credentials too, then are the usual JSON 404
    assert app_client.get("/nope").status_code == 401
    assert app_client.get("/nope", headers=alice).json()["error_code"] == 404


def test_role_outside_authentication_roles_is_403(app_client: TestClient) -> None:
    response = app_client.get("/subjects", headers=basic("bob", "you"))
    assert response.status_code == 403
    assert response.json() == {"error_code": 403, "message": "Forbidden"}
    assert "www-authenticate" not in response.headers


def test_skip_paths(app_client: TestClient) -> None:
    assert app_client.get("/").status_code == 200
    assert app_client.get("/mode").status_code == 200
    assert app_client.get("/mode/s-value?defaultToGlobal=true").status_code == 200
    assert app_client.get("/modes").status_code == 401
    assert app_client.get("/config").status_code == 401


def test_no_body_is_read_before_authentication(app_client: TestClient) -> None:
    # over the body-size limit, yet refused for want of credentials first
    response = app_client.post("/subjects/s-value/versions", content=b"x" * 2_000_000)
    assert response.status_code == 401


def test_log_lines_hold_no_credentials(
    app_client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="sluice.schemas"):
        app_client.get("/subjects", headers=basic("alice", "guess-" + ALICE_PASSWORD))
        app_client.get("/subjects", headers=basic(ALICE_PASSWORD, "x"))
        app_client.get("/subjects")
    text = caplog.text
    assert "wrong or unknown credentials" in text and "no credentials" in text
    assert ALICE_PASSWORD not in text and "alice" not in text
