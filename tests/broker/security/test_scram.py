"""scram.py: RFC 7677's test vector, round trips, kafka-python's client bytes, every refusal."""

from __future__ import annotations

import base64
import warnings

import pytest

from sluice.broker.security.errors import (
    SaslAuthenticationError,
    SaslMessageError,
    SaslStateError,
    ScramServerProofError,
)
from sluice.broker.security.scram import (
    ScramClient,
    ScramServer,
    ScramServerState,
    from_saslname,
    to_saslname,
)
from sluice.broker.security.scram_credential import (
    ScramCredential,
    ScramMechanism,
    create_credential,
)

with warnings.catch_warnings():
    # kafka-python loads its JSON schemas with deprecated importlib.resources calls.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.net.sasl.scram import ScramClient as KafkaPythonScramClient

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512

# RFC 7677 §3
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"


def rfc_credential() -> ScramCredential:
    return create_credential(SHA256, "pencil", 4096, salt=RFC_SALT)


def server_for(
    users: dict[str, ScramCredential], mechanism: ScramMechanism = SHA256
) -> ScramServer:
    return ScramServer(mechanism, users.get)


def test_rfc7677_server_side() -> None:
    server = ScramServer(
        SHA256, {"user": rfc_credential()}.get, nonce_factory=lambda: RFC_SERVER_NONCE
    )
    assert server.receive(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert server.receive(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.username == "user"


def test_rfc7677_client_side() -> None:
    client = ScramClient(SHA256, "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first_message() == RFC_CLIENT_FIRST
    assert client.final_message(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    client.verify_server_final(RFC_SERVER_FINAL)
    assert client.complete


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
@pytest.mark.parametrize("username", ["alice", "a,b=c", "ünï"])
def test_round_trip(mechanism: ScramMechanism, username: str) -> None:
    server = server_for({username: create_credential(mechanism, "pw", 4096)}, mechanism)
    client = ScramClient(mechanism, username, "pw")
    final = server.receive(client.final_message(server.receive(client.first_message())))
    client.verify_server_final(final)
    assert server.username == username and client.complete


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_kafka_python_client_is_accepted(mechanism: ScramMechanism) -> None:
    """kafka-python 3's ScramClient, driven through its message methods, no sockets."""
    server = server_for({"alice": create_credential(mechanism, "alice-pw", 8192)}, mechanism)
    client = KafkaPythonScramClient("alice", "alice-pw", mechanism.mechanism_name)
    client.process_server_first_message(server.receive(client.first_message()))
    server_final = server.receive(client.final_message())
    client.process_server_final_message(server_final)  # raises on a wrong server signature
    assert server.username == "alice"


def test_kafka_python_client_with_wrong_password_is_refused() -> None:
    server = server_for({"alice": create_credential(SHA512, "right", 4096)}, SHA512)
    client = KafkaPythonScramClient("alice", "wrong", "SCRAM-SHA-512")
    client.process_server_first_message(server.receive(client.first_message()))
    with pytest.raises(SaslAuthenticationError, match="Invalid user credentials"):
        server.receive(client.final_message())
    assert server.state is ScramServerState.FAILED


def test_unknown_user_gets_a_stable_fake_salt_and_fails_at_the_end() -> None:
    key = b"k" * 32
    first = []
    for _ in range(2):
        server = ScramServer(SHA256, {}.get, fake_salt_key=key)
        client = ScramClient(SHA256, "ghost", "pw")
        server_first = server.receive(client.first_message())
        first.append(server_first.split(b",s=")[1])
        with pytest.raises(SaslAuthenticationError, match="Invalid user credentials"):
            server.receive(client.final_message(server_first))
    assert first[0] == first[1]


def test_wrong_mechanism_credential_is_treated_as_unknown() -> None:
    server = server_for({"alice": create_credential(SHA512, "pw")}, SHA256)
    client = ScramClient(SHA256, "alice", "pw")
    with pytest.raises(SaslAuthenticationError):
        server.receive(client.final_message(server.receive(client.first_message())))


@pytest.mark.parametrize(
    ("first", "error", "message"),
    [
        (b"y,,n=user,r=abc", SaslMessageError, "channel binding"),
        (b"p=tls-unique,,n=user,r=abc", SaslMessageError, "channel binding"),
        (b"n,,m=ext,n=user,r=abc", SaslMessageError, "mandatory extensions"),
        (b"n,,n=user", SaslMessageError, "format"),
        (b"n,,n=us=er,r=abc", SaslMessageError, "format"),
        (b"n,,n=us=41er,r=abc", SaslMessageError, "format"),
        (b"n,,n=user,r=a b", SaslMessageError, "format"),
        (b"n,,n=user,r=abc,tokenauth=true", SaslAuthenticationError, "delegation tokens"),
        (b"n,a=admin,n=user,r=abc", SaslAuthenticationError, "authorization id"),
        (b"\xff\xfe", SaslMessageError, "UTF-8"),
        (b"n,,n=user,r=" + b"x" * 9000, SaslMessageError, "longer than"),
    ],
)
def test_client_first_refusals(first: bytes, error: type[Exception], message: str) -> None:
    server = server_for({"user": rfc_credential()})
    with pytest.raises(error, match=message):
        server.receive(first)
    assert server.state is ScramServerState.FAILED
    with pytest.raises(SaslStateError) as caught:
        server.receive(RFC_CLIENT_FIRST)
    assert caught.value.code.value == 34


def test_extensions_other_than_tokenauth_are_ignored_and_authzid_may_equal_user() -> None:
    server = ScramServer(
        SHA256, {"user": rfc_credential()}.get, nonce_factory=lambda: RFC_SERVER_NONCE
    )
    challenge = server.receive(b"n,a=user,n=user,r=rOprNGfwEbeRWgbNEkqO,foo=bar,tokenauth=false")
    assert challenge == RFC_SERVER_FIRST


def _at_final() -> ScramServer:
    server = ScramServer(
        SHA256, {"user": rfc_credential()}.get, nonce_factory=lambda: RFC_SERVER_NONCE
    )
    server.receive(RFC_CLIENT_FIRST)
    return server


@pytest.mark.parametrize(
    ("final", "error", "message"),
    [
        (RFC_CLIENT_FINAL.replace(b"c=biws", b"c=eSws"), SaslMessageError, "channel binding"),
        (RFC_CLIENT_FINAL.replace(b"$k0,", b"$k1,"), SaslMessageError, "nonce"),
        (RFC_CLIENT_FINAL.replace(b"p=dHz", b"p=dHy"), SaslAuthenticationError, "credentials"),
        (RFC_CLIENT_FINAL[:-4] + b"AA==", SaslAuthenticationError, "credentials"),
        (RFC_CLIENT_FINAL.split(b",p=")[0] + b",p=AAAA", SaslAuthenticationError, "credentials"),
        (RFC_CLIENT_FINAL.split(b",p=")[0], SaslMessageError, "format"),
        (b"garbage", SaslMessageError, "format"),
    ],
)
def test_client_final_refusals(final: bytes, error: type[Exception], message: str) -> None:
    server = _at_final()
    with pytest.raises(error, match=message):
        server.receive(final)
    assert not server.complete
    with pytest.raises(SaslStateError):
        server.username  # noqa: B018 - the property raises


def test_message_after_completion_is_illegal_state() -> None:
    server = _at_final()
    server.receive(RFC_CLIENT_FINAL)
    with pytest.raises(SaslStateError, match="complete"):
        server.receive(RFC_CLIENT_FINAL)


def test_client_refuses_bad_servers() -> None:
    client = ScramClient(SHA256, "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    client.first_message()
    with pytest.raises(SaslStateError):
        client.verify_server_final(RFC_SERVER_FINAL)
    with pytest.raises(SaslMessageError, match="foreign nonce"):
        client.final_message(RFC_SERVER_FIRST.replace(b"rOpr", b"xOpr"))
    with pytest.raises(SaslMessageError, match="foreign nonce"):
        client.final_message(b"r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    with pytest.raises(SaslMessageError, match="at least 4096 iterations, found 4095"):
        client.final_message(RFC_SERVER_FIRST.replace(b"i=4096", b"i=4095"))
    client.final_message(RFC_SERVER_FIRST)
    with pytest.raises(ScramServerProofError):
        client.verify_server_final(RFC_SERVER_FINAL.replace(b"v=6", b"v=7"))
    with pytest.raises(SaslAuthenticationError, match="other-error"):
        client.verify_server_final(b"e=other-error")
    with pytest.raises(SaslStateError):
        client.final_message(RFC_SERVER_FIRST)  # the password is gone after the first use


def test_saslname_escaping() -> None:
    assert to_saslname("a=b,c") == "a=3Db=2Cc"
    assert from_saslname("a=3Db=2Cc") == "a=b,c"
    with pytest.raises(SaslMessageError):
        from_saslname("a=b")


def test_reprs_show_no_secrets() -> None:
    server = _at_final()
    client = ScramClient(SHA256, "user", "pencil-secret")
    for obj in (server, client, rfc_credential()):
        text = repr(obj)
        assert "pencil" not in text and "rOpr" not in text
        assert base64.b64encode(rfc_credential().stored_key).decode() not in text
