"""Helpers for the ACL tests: a SASL PLAIN broker with the ACL authorizer, users with
different rights, and ACLs made through confluent-kafka's AdminClient (CreateAcls)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

ADMIN_PASSWORD = "acl-admin-pw-6613"
ALICE_PASSWORD = "acl-alice-pw-0921"
BOB_PASSWORD = "acl-bob-pw-5530"
PASSWORDS = {"admin": ADMIN_PASSWORD, "alice": ALICE_PASSWORD, "bob": BOB_PASSWORD}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="admin" password="{ADMIN_PASSWORD}" '
    + " ".join(f'user_{user}="{password}"' for user, password in PASSWORDS.items())
    + ";"
)
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
#: A standalone broker's overrides: SASL PLAIN, the ACL authorizer, admin a super user.
ACL_BROKER = {
    "sasl.enabled.mechanisms": "PLAIN",
    "sasl.jaas.config": JAAS,
    "authorizer.class.name": AUTHORIZER,
    "super.users": "User:admin",
}


def client(bootstrap: str, user: str, **more: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": PASSWORDS[user],
        **more,
    }


def admin(bootstrap: str, user: str = "admin") -> AdminClient:
    return AdminClient(client(bootstrap, user))


def binding(
    principal: str,
    operation: AclOperation,
    restype: ResourceType = ResourceType.TOPIC,
    name: str = "*",
    *,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    host: str = "*",
) -> AclBinding:
    return AclBinding(restype, name, pattern, principal, host, operation, permission)


def grant(bootstrap: str, *bindings: AclBinding) -> None:
    """Create the ACLs as the super user; raises on any failure."""
    client = admin(bootstrap)  # held: a destroyed client fails its futures
    for future in client.create_acls(list(bindings), request_timeout=15).values():
        future.result()


def describe(bootstrap: str, user: str = "admin", **filter_args: Any) -> list[AclBinding]:
    acl_filter = AclBindingFilter(
        filter_args.get("restype", ResourceType.ANY),
        filter_args.get("name"),
        filter_args.get("pattern", ResourcePatternType.ANY),
        filter_args.get("principal"),
        filter_args.get("host"),
        filter_args.get("operation", AclOperation.ANY),
        filter_args.get("permission", AclPermissionType.ANY),
    )
    client = admin(bootstrap, user)
    result: list[AclBinding] = client.describe_acls(acl_filter, request_timeout=15).result()
    return result


def create_topic(bootstrap: str, topic: str, user: str = "admin", partitions: int = 1) -> None:
    client = admin(bootstrap, user)
    futures = client.create_topics([NewTopic(topic, partitions, 1)], request_timeout=15)
    futures[topic].result()


def produce(
    bootstrap: str, user: str, topic: str, count: int = 3, partition: int = -1
) -> list[KafkaError | None]:
    """Produce ``count`` messages as ``user`` (to ``partition``, or where the partitioner
    says); the delivery error of each (None: delivered)."""
    errors: list[KafkaError | None] = []
    producer = Producer(client(bootstrap, user, **{"message.timeout.ms": 8000}))
    for i in range(count):
        producer.produce(
            topic, f"m{i}".encode(), partition=partition,
            on_delivery=lambda e, _m: errors.append(e),
        )  # fmt: skip
    producer.flush(20)
    return errors


def consume(
    bootstrap: str, user: str, topic: str, group: str | None = None, count: int = 3
) -> tuple[list[bytes], list[KafkaError]]:
    """Read up to ``count`` messages with a group; the values and the errors reported."""
    config = client(
        bootstrap, user,
        **{"group.id": group or uuid.uuid4().hex, "auto.offset.reset": "earliest",
           "session.timeout.ms": 6000},
    )  # fmt: skip
    consumer = Consumer(config)
    consumer.subscribe([topic])
    got: list[bytes] = []
    errors: list[KafkaError] = []
    try:
        for _ in range(20):
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                errors.append(message.error())
                if message.error().fatal() or len(errors) > 3:
                    break
                continue
            got.append(message.value())
            if len(got) == count:
                break
    finally:
        consumer.close()
    return got, errors


def error_code(exc: BaseException) -> int | None:
    """The Kafka error code a confluent-kafka exception carries."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return int(exc.args[0].code())
    return None


def codes(errors: list[KafkaError | None]) -> set[int | None]:
    return {None if e is None else int(e.code()) for e in errors}


def topic_names(bootstrap: str, user: str) -> set[str]:
    client = admin(bootstrap, user)
    metadata = client.list_topics(timeout=10)
    return {name for name, topic in metadata.topics.items() if topic.error is None}


def merged(*configs: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for config in configs:
        out.update(config)
    return out
