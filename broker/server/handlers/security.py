"""The SCRAM credential administration of KIP-554 (DescribeUserScramCredentials,
AlterUserScramCredentials), and the answer to SaslHandshake / SaslAuthenticate on a listener
without SASL. (On a SASL listener those two are the connection's: see
``sluice.broker.server.sasl_session``.)

The admin handlers read and write the broker's ``ScramStore`` (``ctx.scram_credentials``:
ZooKeeper's ``/config/users`` or the standalone file): iterations 4096–16384, mechanisms
SCRAM-SHA-256/512, a user named twice in one request is DUPLICATE_RESOURCE, describing or
deleting what does not exist RESOURCE_NOT_FOUND, as Kafka answers. Both ask for DESCRIBE /
ALTER on the cluster, checked before the handler runs (``sluice.broker.server.authorization``).

The handlers run on the broker's event loop, their store calls through ``ctx.off_loop``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sluice.broker.protocol import Request
from sluice.broker.protocol.errors import Errors
from sluice.broker.security.scram_credential import (
    MAX_ALTER_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
)
from sluice.broker.server.context import BrokerContext
from sluice.broker.server.responses import respond
from sluice.broker.server.sasl_session import SASL_HANDSHAKE


async def handle_sasl_without_sasl(ctx: BrokerContext, request: Request) -> bytes:
    """SaslHandshake / SaslAuthenticate on a listener without SASL: ILLEGAL_SASL_STATE, as
    Kafka answers them there (the connection stays open)."""
    if request.api_key == SASL_HANDSHAKE:
        return respond(request, {"error_code": Errors.ILLEGAL_SASL_STATE, "mechanisms": []})
    message = "SaslAuthenticate on a listener without SASL"
    return respond(
        request,
        {"error_code": Errors.ILLEGAL_SASL_STATE, "error_message": message, "auth_bytes": b""},
    )


# --------------------------------------------------------------------------------------------
# KIP-554: Describe / AlterUserScramCredentials
# --------------------------------------------------------------------------------------------


async def handle_describe_user_scram_credentials(ctx: BrokerContext, request: Request) -> bytes:
    store = ctx.scram_credentials
    wanted = request.body.users
    results = []
    if wanted is None:
        users = await ctx.off_loop(store.users)
        names = sorted(name for name, config in users.items() if config.credentials())
    else:
        names = [str(user.name) for user in wanted]
    for name in dict.fromkeys(names):
        if names.count(name) > 1:
            message = f"Cannot describe SCRAM credentials for the same user twice: {name}"
            results.append(_user_error(name, Errors.DUPLICATE_RESOURCE, message))
            continue
        config = await ctx.off_loop(store.user, name)
        credentials = config.credentials() if config is not None else {}
        if not credentials:
            message = f"Attempt to describe a user credential that does not exist: {name}"
            results.append(_user_error(name, Errors.RESOURCE_NOT_FOUND, message))
            continue
        results.append(_described(name, credentials))
    return respond(
        request,
        {"error_code": Errors.NONE, "error_message": None, "results": results, "throttle_time": 0},
    )


def _described(name: str, credentials: dict[ScramMechanism, ScramCredential]) -> dict[str, Any]:
    infos = [
        {"mechanism": mechanism.kafka_type, "iterations": credential.iterations}
        for mechanism, credential in sorted(credentials.items(), key=lambda i: i[0].kafka_type)
    ]
    return {
        "user": name,
        "error_code": Errors.NONE,
        "error_message": None,
        "credential_infos": infos,
    }


def _user_error(name: str, code: Errors, message: str) -> dict[str, Any]:
    return {"user": name, "error_code": code, "error_message": message, "credential_infos": []}


async def handle_alter_user_scram_credentials(ctx: BrokerContext, request: Request) -> bytes:
    store = ctx.scram_credentials
    body = request.body
    users = [str(d.name) for d in body.deletions] + [str(u.name) for u in body.upsertions]
    seen: dict[str, tuple[Errors, str | None]] = {}
    pairs = [(str(d.name), int(d.mechanism)) for d in body.deletions] + [
        (str(u.name), int(u.mechanism)) for u in body.upsertions
    ]
    for name, mechanism_code in pairs:
        if pairs.count((name, mechanism_code)) > 1:
            message = "A user credential cannot be altered twice in the same request"
            seen[name] = (Errors.DUPLICATE_RESOURCE, message)
    changes: list[tuple[str, ScramMechanism, Callable[[], ScramCredential | None]]] = []
    for deletion in body.deletions:
        name = str(deletion.name)
        mechanism = _mechanism(name, int(deletion.mechanism), seen)
        if mechanism is not None:
            changes.append((name, mechanism, lambda: None))
    for upsertion in body.upsertions:
        name = str(upsertion.name)
        mechanism = _mechanism(name, int(upsertion.mechanism), seen)
        if mechanism is None:
            continue
        iterations = int(upsertion.iterations)
        if iterations < MIN_ITERATIONS:
            seen[name] = (Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif iterations > MAX_ALTER_ITERATIONS:
            seen[name] = (Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        elif not bytes(upsertion.salt) or not bytes(upsertion.salted_password):
            seen[name] = (
                Errors.UNACCEPTABLE_CREDENTIAL,
                "Salt and salted password must not be empty",
            )
        else:
            changes.append((name, mechanism, _credential_of(mechanism, upsertion)))
    for name, mechanism, make in changes:
        if name in seen:
            continue  # a user with any bad alteration gets none of them applied
        credential = make()
        existed = await ctx.off_loop(store.set_credential, name, mechanism, credential)
        if credential is None and not existed:
            message = "Attempt to delete a user credential that does not exist"
            seen[name] = (Errors.RESOURCE_NOT_FOUND, message)
    ok: tuple[Errors, str | None] = (Errors.NONE, None)
    results = [
        {"user": name, "error_code": seen.get(name, ok)[0], "error_message": seen.get(name, ok)[1]}
        for name in dict.fromkeys(users)
    ]
    return respond(request, {"results": results, "throttle_time": 0})


def _mechanism(
    name: str, code: int, errors: dict[str, tuple[Errors, str | None]]
) -> ScramMechanism | None:
    if not name:
        errors[name] = (Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        return None
    mechanism = ScramMechanism.by_kafka_type(code)
    if mechanism is None:
        errors[name] = (Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    return mechanism


def _credential_of(mechanism: ScramMechanism, upsertion: Any) -> Callable[[], ScramCredential]:
    """The stored form of KIP-554's (salt, salted password, iterations): the client salted
    the password; the broker derives the keys and never sees the password."""
    salted = bytes(upsertion.salted_password)

    def make() -> ScramCredential:
        return ScramCredential(
            mechanism=mechanism,
            salt=bytes(upsertion.salt),
            stored_key=mechanism.hash(mechanism.hmac(salted, b"Client Key")),
            server_key=mechanism.hmac(salted, b"Server Key"),
            iterations=int(upsertion.iterations),
        )

    return make
