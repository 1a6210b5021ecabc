"""Kafka ACLs on a standalone broker, with real clients over SASL PLAIN: each operation denied,
then granted by an ACL; prefixed ACLs; DENY beating ALLOW; super users;
allow.everyone.if.no.acl.found; Metadata hiding topics; ACLs kept across a restart; the
cluster-level APIs refused with their own error responses; SECURITY_DISABLED without an
authorizer."""

from __future__ import annotations

import stat
import time
import uuid
import warnings

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclOperation,
    AclPermissionType,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)

from sluice.broker.protocol.errors import Errors
from tests.broker.security_wiring.acl_clients import (
    ACL_BROKER,
    ALICE_PASSWORD,
    PASSWORDS,
    admin,
    binding,
    client,
    codes,
    consume,
    create_topic,
    describe,
    error_code,
    grant,
    produce,
    topic_names,
)
from tests.broker.security_wiring.conftest import SecureBroker, StartSecure

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import ACL, ACLFilter, ACLOperation, ACLPermissionType, ResourcePattern
    from kafka.admin import ResourceType as KpResourceType
    from kafka.admin._acls import ACLResourcePatternType, ResourcePatternFilter
    from kafka.errors import (
        ClusterAuthorizationFailedError,
        SecurityDisabledError,
        TopicAuthorizationFailedError,
    )

EVERYTHING = ACLFilter(
    principal=None, host=None, operation=ACLOperation.ANY, permission_type=ACLPermissionType.ANY,
    resource_pattern=ResourcePatternFilter(KpResourceType.ANY, None, ACLResourcePatternType.ANY),
)  # fmt: skip

pytestmark = [
    pytest.mark.broker,
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning"),
]

ALICE = "User:alice"
BOB = "User:bob"
TOPIC_DENIED = int(KafkaError.TOPIC_AUTHORIZATION_FAILED)
GROUP_DENIED = int(KafkaError.GROUP_AUTHORIZATION_FAILED)
CLUSTER_DENIED = int(KafkaError.CLUSTER_AUTHORIZATION_FAILED)


@pytest.fixture
def acl_broker(start_secure: StartSecure) -> SecureBroker:
    return start_secure("SASL_PLAINTEXT", ACL_BROKER)


def test_produce_denied_then_granted(acl_broker: SecureBroker) -> None:
    bootstrap = acl_broker.bootstrap
    create_topic(bootstrap, "orders")
    assert codes(produce(bootstrap, "alice", "orders")) == {TOPIC_DENIED}
    grant(bootstrap, binding(ALICE, AclOperation.WRITE, name="orders"))
    assert codes(produce(bootstrap, "alice", "orders")) == {None}
    # bob has no ACL: still refused
    assert codes(produce(bootstrap, "bob", "orders")) == {TOPIC_DENIED}


def test_consume_with_group_denied_then_granted(acl_broker: SecureBroker) -> None:
    bootstrap = acl_broker.bootstrap
    create_topic(bootstrap, "events")
    assert codes(produce(bootstrap, "admin", "events")) == {None}
    got, errors = consume(bootstrap, "alice", "events", "readers")
    assert got == []
    assert GROUP_DENIED in {e.code() for e in errors}  # FindCoordinator: DESCRIBE on the group
    grant(bootstrap, binding(ALICE, AclOperation.READ, ResourceType.GROUP, "readers"))
    got, errors = consume(bootstrap, "alice", "events", "readers")
    assert got == []
    assert TOPIC_DENIED in {e.code() for e in errors}
    grant(bootstrap, binding(ALICE, AclOperation.READ, name="events"))
    got, errors = consume(bootstrap, "alice", "events", "readers")
    assert got == [b"m0", b"m1", b"m2"], errors


def test_create_and_delete_topic_denied_then_granted(acl_broker: SecureBroker) -> None:
    bootstrap = acl_broker.bootstrap
    with pytest.raises(KafkaException) as caught:
        create_topic(bootstrap, "alice-topic", user="alice")
    assert error_code(caught.value) == TOPIC_DENIED
    grant(
        bootstrap,
        binding(ALICE, AclOperation.CREATE, name="alice-", pattern=ResourcePatternType.PREFIXED),
    )
    create_topic(bootstrap, "alice-topic", user="alice")
    alice = admin(bootstrap, "alice")
    futures = alice.delete_topics(["alice-topic"], request_timeout=15)
    with pytest.raises(KafkaException) as caught:
        futures["alice-topic"].result()
    assert error_code(caught.value) == TOPIC_DENIED
    grant(bootstrap, binding(ALICE, AclOperation.DELETE, name="alice-topic"))
    alice.delete_topics(["alice-topic"], request_timeout=15)["alice-topic"].result()
    assert "alice-topic" not in topic_names(bootstrap, "admin")


def test_describe_configs_denied_then_granted(acl_broker: SecureBroker) -> None:
    bootstrap = acl_broker.bootstrap
    create_topic(bootstrap, "configured")
    resource = ConfigResource(ConfigResource.Type.TOPIC, "configured")
    alice = admin(bootstrap, "alice")
    with pytest.raises(KafkaException) as caught:
        alice.describe_configs([resource], request_timeout=15)[resource].result()
    assert error_code(caught.value) == TOPIC_DENIED
    grant(bootstrap, binding(ALICE, AclOperation.DESCRIBE_CONFIGS, name="configured"))
    configs = alice.describe_configs([resource], request_timeout=15)[resource].result()
    assert "retention.ms" in configs
    broker = ConfigResource(ConfigResource.Type.BROKER, "0")
    with pytest.raises(KafkaException) as caught:
        alice.describe_configs([broker], request_timeout=15)[broker].result()
    assert error_code(caught.value) == CLUSTER_DENIED


def test_prefixed_acl_covers_only_its_prefix(acl_broker: SecureBroker) -> None:
    bootstrap = acl_broker.bootstrap
    for topic in ("pay-eu", "payroll"):
        create_topic(bootstrap, topic)
    grant(
        bootstrap,
        binding(ALICE, AclOperation.WRITE, name="pay-", pattern=ResourcePatternType.PREFIXED),
    )
    assert codes(produce(bootstrap, "alice", "pay-eu")) == {None}
    assert codes(produce(bootstrap, "alice", "payroll")) == {TOPIC_DENIED}
    prefixed = describe(bootstrap, pattern=ResourcePatternType.PREFIXED)
    assert [(b.name, b.principal, b.operation) for b in prefixed] == [
        ("pay-", ALICE, AclOperation.WRITE)
    ]
    # MATCH: the ACLs that apply to a topic, whatever their pattern
    matching = describe(
        bootstrap, restype=ResourceType.TOPIC, name="pay-eu", pattern=ResourcePatternType.MATCH
    )
    assert [b.name for b in matching] == ["pay-"]


def test_deny_beats_allow(acl_broker: SecureBroker) -> None:
    bootstrap = acl_broker.bootstrap
    create_topic(bootstrap, "guarded")
    grant(
        bootstrap,
        binding(ALICE, AclOperation.ALL, name="guarded"),
        binding(ALICE, AclOperation.WRITE, name="guarded", permission=AclPermissionType.DENY),
        binding(BOB, AclOperation.WRITE, name="guarded"),
    )
    assert codes(produce(bootstrap, "alice", "guarded")) == {TOPIC_DENIED}
    assert codes(produce(bootstrap, "bob", "guarded")) == {None}
    # a DENY for everyone on the wildcard beats bob's ALLOW on the name
    grant(
        bootstrap,
        binding("User:*", AclOperation.WRITE, permission=AclPermissionType.DENY),
    )
    assert codes(produce(bootstrap, "bob", "guarded")) == {TOPIC_DENIED}
    # the super user is not subject to ACLs at all
    assert codes(produce(bootstrap, "admin", "guarded")) == {None}


def test_metadata_hides_topics_without_describe(acl_broker: SecureBroker) -> None:
    bootstrap = acl_broker.bootstrap
    for topic in ("visible", "hidden"):
        create_topic(bootstrap, topic)
    assert {"visible", "hidden"} <= topic_names(bootstrap, "admin")
    assert topic_names(bootstrap, "alice") == set()
    grant(bootstrap, binding(ALICE, AclOperation.READ, name="visible"))  # READ implies DESCRIBE
    assert topic_names(bootstrap, "alice") == {"visible"}
    # asked by name, a hidden topic is TOPIC_AUTHORIZATION_FAILED, existing or not
    alice = admin(bootstrap, "alice")
    metadata = alice.list_topics("hidden", timeout=10)
    assert metadata.topics["hidden"].error.code() == TOPIC_DENIED


def test_cluster_apis_refused_with_their_own_responses(acl_broker: SecureBroker) -> None:
    bootstrap = acl_broker.bootstrap
    alice = admin(bootstrap, "alice")
    with pytest.raises(KafkaException) as caught:
        for future in alice.create_acls(
            [binding(ALICE, AclOperation.ALL)], request_timeout=15
        ).values():
            future.result()
    assert error_code(caught.value) == CLUSTER_DENIED
    kp_alice = kafka_python_admin(bootstrap, "alice")
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            kp_alice.describe_acls(EVERYTHING)
        # DescribeLogDirs before v3 has no error code: refused, it lists nothing (as Kafka)
        assert kp_alice.describe_log_dirs() == [{"broker": 0, "log_dirs": []}]
        # granted DESCRIBE on the cluster, alice may list the ACLs and the log dirs
        grant(
            bootstrap, binding(ALICE, AclOperation.DESCRIBE, ResourceType.BROKER, "kafka-cluster")
        )
        found, _error = kp_alice.describe_acls(EVERYTHING)
        assert [a.principal for a in found] == [ALICE]
        assert kp_alice.describe_log_dirs()[0]["log_dirs"] != []
    finally:
        kp_alice.close()


def kafka_python_admin(bootstrap: str, user: str) -> KafkaAdminClient:
    return KafkaAdminClient(
        bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
        sasl_plain_username=user, sasl_plain_password=PASSWORDS[user],
    )  # fmt: skip


def test_invalid_bindings_are_refused(acl_broker: SecureBroker) -> None:
    bootstrap = acl_broker.bootstrap
    super_user = admin(bootstrap)
    futures = super_user.create_acls(
        [
            binding(ALICE, AclOperation.READ, ResourceType.BROKER, "not-the-cluster"),
            binding("alice-without-type", AclOperation.READ, name="x"),
            binding(ALICE, AclOperation.READ, name="fine"),
        ],
        request_timeout=15,
    )
    outcomes = []
    for future in futures.values():
        try:
            future.result()
            outcomes.append(None)
        except KafkaException as exc:
            outcomes.append(error_code(exc))
    assert sorted(outcomes, key=str) == sorted(
        [int(KafkaError.INVALID_REQUEST), int(KafkaError.INVALID_REQUEST), None], key=str
    )
    assert [b.name for b in describe(bootstrap)] == ["fine"]


def test_delete_acls_removes_what_the_filter_matches(acl_broker: SecureBroker) -> None:
    bootstrap = acl_broker.bootstrap
    create_topic(bootstrap, "shared")
    grant(
        bootstrap,
        binding(ALICE, AclOperation.WRITE, name="shared"),
        binding(ALICE, AclOperation.READ, name="shared"),
        binding(BOB, AclOperation.WRITE, name="shared"),
    )
    from confluent_kafka.admin import AclBindingFilter

    doomed = AclBindingFilter(
        ResourceType.TOPIC, "shared", ResourcePatternType.LITERAL, ALICE, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    super_user = admin(bootstrap)
    deleted = super_user.delete_acls([doomed], request_timeout=15)[doomed].result()
    assert sorted(b.operation.name for b in deleted) == ["READ", "WRITE"]
    assert [(b.principal, b.operation) for b in describe(bootstrap)] == [(BOB, AclOperation.WRITE)]
    assert codes(produce(bootstrap, "alice", "shared")) == {TOPIC_DENIED}


def test_acls_survive_a_restart(acl_broker: SecureBroker) -> None:
    bootstrap = acl_broker.bootstrap
    create_topic(bootstrap, "durable")
    grant(bootstrap, binding(ALICE, AclOperation.WRITE, name="durable"))
    store = acl_broker.log_dir / "sluice-acls.json"
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    assert ALICE_PASSWORD not in store.read_text()
    acl_broker.restart()
    assert [(b.name, b.principal) for b in describe(bootstrap)] == [("durable", ALICE)]
    assert codes(produce(bootstrap, "alice", "durable")) == {None}
    assert codes(produce(bootstrap, "bob", "durable")) == {TOPIC_DENIED}


def test_allow_everyone_if_no_acl_found(start_secure: StartSecure) -> None:
    broker = start_secure(
        "SASL_PLAINTEXT", {**ACL_BROKER, "allow.everyone.if.no.acl.found": "true"}
    )
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "open")
    assert codes(produce(bootstrap, "bob", "open")) == {None}
    # once any ACL applies to the topic, only the ACLs decide
    grant(bootstrap, binding(ALICE, AclOperation.WRITE, name="open"))
    assert codes(produce(bootstrap, "bob", "open")) == {TOPIC_DENIED}
    assert codes(produce(bootstrap, "alice", "open")) == {None}


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(
    start_secure: StartSecure,
) -> None:
    broker = start_secure("SASL_PLAINTEXT", {k: v for k, v in ACL_BROKER.items()
                                             if k.startswith("sasl.")})  # fmt: skip
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "free", user="bob")  # no authorizer: everything allowed
    assert codes(produce(bootstrap, "bob", "free")) == {None}
    bob = admin(bootstrap, "bob")
    with pytest.raises(KafkaException) as caught:
        for future in bob.create_acls(
            [binding(BOB, AclOperation.ALL)], request_timeout=15
        ).values():
            future.result()
    assert error_code(caught.value) == int(KafkaError.SECURITY_DISABLED)
    kp_bob = kafka_python_admin(bootstrap, "bob")
    try:
        with pytest.raises(SecurityDisabledError):
            kp_bob.describe_acls(EVERYTHING)
    finally:
        kp_bob.close()


def test_kafka_python_admin_and_producer(acl_broker: SecureBroker) -> None:
    bootstrap = acl_broker.bootstrap
    create_topic(bootstrap, "kp")
    sasl = {
        "bootstrap_servers": bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
    }
    kp_admin = KafkaAdminClient(
        **sasl, sasl_plain_username="admin", sasl_plain_password=client(bootstrap, "admin")[
            "sasl.password"
        ],
    )  # fmt: skip
    try:
        producer = KafkaProducer(
            **sasl, sasl_plain_username="alice", sasl_plain_password=ALICE_PASSWORD,
            max_block_ms=5000, retries=0,
        )  # fmt: skip
        try:
            with pytest.raises(TopicAuthorizationFailedError):
                producer.send("kp", b"refused").get(timeout=10)
        finally:
            producer.close()
        acl = ACL(
            principal=ALICE, host="*", operation=ACLOperation.WRITE,
            permission_type=ACLPermissionType.ALLOW,
            resource_pattern=ResourcePattern(KpResourceType.TOPIC, "kp"),
        )  # fmt: skip
        created = kp_admin.create_acls([acl])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        acl_filter = ACLFilter(
            principal=None, host="*", operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePattern(KpResourceType.TOPIC, "kp"),
        )  # fmt: skip
        found, error = kp_admin.describe_acls(acl_filter)
        assert [a.principal for a in found] == [ALICE]
        deadline = time.monotonic() + 20
        producer = KafkaProducer(
            **sasl, sasl_plain_username="alice", sasl_plain_password=ALICE_PASSWORD,
            max_block_ms=10000,
        )  # fmt: skip
        try:
            metadata = producer.send("kp", b"allowed").get(
                timeout=max(1, deadline - time.monotonic())
            )
            assert metadata.topic == "kp"
        finally:
            producer.close()
        deleted = kp_admin.delete_acls([acl_filter])
        assert len(deleted) == 1 and len(deleted[0][1]) == 1
        assert kp_admin.describe_acls(acl_filter)[0] == []
    finally:
        kp_admin.close()
    assert Errors.TOPIC_AUTHORIZATION_FAILED == TOPIC_DENIED


def test_transactional_producer_needs_write_on_its_transactional_id(
    acl_broker: SecureBroker,
) -> None:
    bootstrap = acl_broker.bootstrap
    create_topic(bootstrap, "ledger")
    grant(bootstrap, binding(ALICE, AclOperation.WRITE, name="ledger"))

    def transact() -> None:
        producer = Producer(client(bootstrap, "alice", **{"transactional.id": "alice-tx"}))
        producer.init_transactions(15)
        producer.begin_transaction()
        producer.produce("ledger", b"entry")
        producer.commit_transaction(15)

    with pytest.raises(KafkaException) as caught:
        transact()
    assert error_code(caught.value) == int(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    grant(
        bootstrap,
        binding(ALICE, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, "alice-tx"),
    )
    transact()


def test_idempotent_producer_needs_write_somewhere(acl_broker: SecureBroker) -> None:
    """InitProducerId without a transactional id: IDEMPOTENT_WRITE on the cluster or WRITE on
    any topic (Kafka 3)."""
    bootstrap = acl_broker.bootstrap
    create_topic(bootstrap, "idem")
    grant(bootstrap, binding(BOB, AclOperation.DESCRIBE, name="idem"))  # sees it, cannot write
    producer = Producer(client(bootstrap, "bob", **{"enable.idempotence": True}))
    with pytest.raises(KafkaException) as caught:  # a fatal error: no producer id
        for _ in range(20):
            producer.produce("idem", b"x")
            producer.flush(1)
    assert error_code(caught.value) == CLUSTER_DENIED
    grant(bootstrap, binding(BOB, AclOperation.WRITE, name="idem"))
    assert codes(produce(bootstrap, "bob", "idem")) == {None}


def test_a_topic_deleted_by_id_without_the_right_is_not_named(acl_broker: SecureBroker) -> None:
    """DeleteTopics v6 (KIP-516) by topic id: refused, the answer carries the id and
    TOPIC_AUTHORIZATION_FAILED but not the topic's name, as Kafka's."""
    bootstrap = acl_broker.bootstrap
    create_topic(bootstrap, "secret-topic")
    kp_admin = kafka_python_admin(bootstrap, "admin")
    kp_alice = kafka_python_admin(bootstrap, "alice")
    try:
        (described,) = kp_admin.describe_topics(["secret-topic"])
        topic_id = uuid.UUID(str(described["topic_id"]))
        refused = kp_alice.delete_topics([topic_id], raise_errors=False)
    finally:
        kp_alice.close()
        kp_admin.close()
    assert [(t["name"], str(t["topic_id"]), t["error_code"]) for t in refused["topics"]] == [
        (None, str(topic_id), TOPIC_DENIED)
    ]
    assert "secret-topic" in topic_names(bootstrap, "admin")
