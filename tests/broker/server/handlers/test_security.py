"""The SCRAM credential APIs of KIP-554 against a standalone broker (its users file), through
confluent-kafka's AdminClient and by hand over the wire; and SaslHandshake / SaslAuthenticate
on a listener without SASL, which are answered ILLEGAL_SASL_STATE on a connection that stays
open. (The SASL exchange itself is the connection's: ``tests/broker/security_wiring``.)"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from sluice.broker.protocol import ApiKey
from sluice.broker.protocol.errors import Errors
from sluice.broker.security.scram_store import USERS_FILE
from sluice.broker.server.sasl_session import SASL_AUTHENTICATE, SASL_HANDSHAKE
from sluice.testing.broker import BrokerProcess
from tests.broker.server.clients import unique
from tests.broker.server.wire import WireClient, request

pytestmark = pytest.mark.broker

SCRAM_SHA_256 = 1  # KIP-554's mechanism type


def test_a_scram_credential_is_stored_described_and_deleted(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    user = unique("scram-user")
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"a-password-4471"
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=15)
    described = admin.describe_user_scram_credentials([user])[user].result(timeout=15)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 8192)
    ]
    # Stored in the first log dir's users file: the user, never the password (the client
    # sends it salted).
    stored = (broker.log_dir / USERS_FILE).read_bytes()
    assert user.encode() in stored
    assert b"a-password-4471" not in stored

    delete = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)
    for future in admin.alter_user_scram_credentials([delete]).values():
        future.result(timeout=15)
    with pytest.raises(KafkaException, match="does not exist"):
        admin.describe_user_scram_credentials([user])[user].result(timeout=15)


def test_refused_alterations_change_nothing(broker: BrokerProcess) -> None:
    user = unique("scram-user")

    def upsertion(iterations: int) -> dict[str, object]:
        return {
            "name": user,
            "mechanism": SCRAM_SHA_256,
            "iterations": iterations,
            "salt": b"salt",
            "salted_password": b"x" * 32,
        }

    with WireClient(broker.port) as wire:
        twice = wire.call(
            request(
                ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                0,
                {"deletions": [], "upsertions": [upsertion(8192), upsertion(8192)]},
            )
        )
        assert [(r.user, r.error_code) for r in twice.results] == [
            (user, Errors.DUPLICATE_RESOURCE)
        ]
        too_few = wire.call(
            request(
                ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                0,
                {"deletions": [], "upsertions": [upsertion(1000)]},
            )
        )
        assert [(r.error_code, r.error_message) for r in too_few.results] == [
            (Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        ]
        deleted = wire.call(
            request(
                ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                0,
                {"deletions": [{"name": user, "mechanism": SCRAM_SHA_256}], "upsertions": []},
            )
        )
        assert [r.error_code for r in deleted.results] == [Errors.RESOURCE_NOT_FOUND]
        described = wire.call(
            request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": [{"name": user}]})
        )
        assert [r.error_code for r in described.results] == [Errors.RESOURCE_NOT_FOUND]


def test_sasl_requests_on_a_plaintext_listener(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as wire:
        handshake = wire.call(request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}))
        assert handshake.error_code == Errors.ILLEGAL_SASL_STATE
        assert list(handshake.mechanisms) == []
        authenticate = wire.call(request(SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0u\0p"}))
        assert authenticate.error_code == Errors.ILLEGAL_SASL_STATE
        assert authenticate.error_message == "SaslAuthenticate on a listener without SASL"
        assert wire.api_versions_ok()  # the connection serves on
