"""``sluice acls list|add|remove`` (Kafka's kafka-acls.sh), over confluent-kafka's AdminClient.

Kafka's spelling works as well: ``sluice acls --bootstrap-server H --add --allow-principal
User:alice --operation Read --topic orders`` (the action flag may stand anywhere).

Resources: ``--topic``, ``--group``, ``--transactional-id`` (each may repeat; ``*`` is every
resource of the type) and ``--cluster``; ``--resource-pattern-type`` literal (default) or
prefixed, and for list/remove also any or match. Entries: ``--allow-principal`` /
``--deny-principal`` (``User:alice``, ``User:*``), ``--allow-host`` / ``--deny-host`` (default
``*``), ``--operation`` (default All; each checked against the resource type as Kafka's
AclCommand does). ``--producer`` stands for WRITE, DESCRIBE and CREATE on the topics (WRITE
and DESCRIBE on the transactional ids, IDEMPOTENT_WRITE on the cluster with
``--idempotent``); ``--consumer`` for READ and DESCRIBE on the topics and READ on the groups.

``remove`` without principals or operations removes every ACL of the resources. ``list``
without a resource lists every ACL; ``--principal`` narrows it.

Security settings of the client come from ``--command-config FILE`` as in Kafka's tools: the
librdkafka keys it shares with Java's client pass through (``security.protocol``,
``sasl.mechanism``, ``ssl.*`` locations), ``sasl.jaas.config`` gives the user name and
password, ``ssl.truststore.location`` of a PEM truststore the CA file.

Exit status: 0 done; 1 a broker refused something (each refusal printed; CLUSTER_AUTHORIZATION_
FAILED, SECURITY_DISABLED, an invalid binding); 2 a bad flag or command config; 3 no broker
answered. librdkafka drops the error code of a DescribeAcls response (an unauthorized or
authorizer-less broker looks like one with no ACLs), so an empty listing is checked against
the broker's ``authorizer.class.name`` (DescribeConfigs) before it is reported as empty.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any, Final

from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)

from sluice.broker.security.acl import AclOperation as Op
from sluice.broker.security.acl import parse_enum
from sluice.broker.security.errors import AclBindingError
from sluice.cli.errors import CommandError, CommandUsageError, raise_for_kafka
from sluice.cli.kafka_clients import client_config
from sluice.common.jaas import JaasConfigError, parse_jaas_config
from sluice.common.properties import load_properties

__all__ = ["add_parser", "acls_list", "acls_add", "acls_remove", "command_config"]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
CLUSTER_NAME: Final = "kafka-cluster"
TIMEOUT_S: Final = 30

# The operations Kafka's AclCommand accepts per resource type (AclEntry.supportedOperations).
_SUPPORTED: Final = {
    ResourceType.TOPIC: {Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
                         Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.ALL},
    ResourceType.GROUP: {Op.READ, Op.DESCRIBE, Op.DELETE, Op.ALL},
    ResourceType.BROKER: {Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                          Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE, Op.ALL},
    ResourceType.TRANSACTIONAL_ID: {Op.DESCRIBE, Op.WRITE, Op.ALL},
}  # fmt: skip
_TYPE_NAMES: Final = {
    ResourceType.TOPIC: "TOPIC",
    ResourceType.GROUP: "GROUP",
    ResourceType.BROKER: "CLUSTER",  # librdkafka's name for Kafka's CLUSTER (code 4)
    ResourceType.TRANSACTIONAL_ID: "TRANSACTIONAL_ID",
}
# librdkafka's keys that Java's clients spell the same way.
_PASSED_KEYS: Final = frozenset(
    {"security.protocol", "sasl.mechanism", "sasl.username", "sasl.password", "client.id",
     "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
     "ssl.endpoint.identification.algorithm"}
)  # fmt: skip
# Java-only keys a command config may hold that need no translation.
_IGNORED_KEYS: Final = frozenset({"ssl.truststore.type", "sasl.login.callback.handler.class"})

Resource = tuple[ResourceType, str]
# confluent-kafka's stubs type the filter's fields as str; None is its "any".
_Filter: Any = AclBindingFilter


def add_parser(sub: Any) -> None:
    acls = sub.add_parser("acls", help="list, add and remove ACLs (kafka-acls.sh)")
    actions = acls.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="the ACLs of resources (every ACL without one)")
    listing.add_argument("--principal", action="append", default=[],
                         help="only the ACLs of this principal (repeatable)")  # fmt: skip
    listing.set_defaults(func=acls_list)
    add = actions.add_parser("add", help="add ACLs")
    add.set_defaults(func=acls_add)
    remove = actions.add_parser("remove", help="remove ACLs (all of a resource's without "
                                "principals and operations)")  # fmt: skip
    remove.add_argument("--force", action="store_true", help="accepted for kafka-acls.sh "
                        "compatibility: sluice never asks")  # fmt: skip
    remove.set_defaults(func=acls_remove)
    for p in (listing, add, remove):
        p.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP)
        p.add_argument("--command-config", help="a properties file of client security settings")
        p.add_argument("--topic", action="append", default=[])
        p.add_argument("--group", action="append", default=[])
        p.add_argument("--transactional-id", action="append", default=[])
        p.add_argument("--cluster", action="store_true", help="the cluster resource")
        p.add_argument(
            "--resource-pattern-type", default="literal",
            choices=("literal", "prefixed", "any", "match"),
        )  # fmt: skip
    for p in (add, remove):
        p.add_argument("--allow-principal", action="append", default=[])
        p.add_argument("--deny-principal", action="append", default=[])
        p.add_argument("--allow-host", action="append", default=[])
        p.add_argument("--deny-host", action="append", default=[])
        p.add_argument(
            "--operation", action="append", default=[],
            help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
            "DescribeConfigs, AlterConfigs, IdempotentWrite, All (add: default All)",
        )  # fmt: skip
        p.add_argument("--producer", action="store_true", help="the ACLs of a producer")
        p.add_argument("--consumer", action="store_true", help="the ACLs of a consumer")
        p.add_argument("--idempotent", action="store_true",
                       help="with --producer: IDEMPOTENT_WRITE on the cluster")  # fmt: skip


# -- the client --------------------------------------------------------------------------------


def command_config(path: str | None) -> dict[str, str]:
    """librdkafka settings from a Kafka client properties file (see the module docstring)."""
    if path is None:
        return {}
    props = load_properties(path)
    out: dict[str, str] = {}
    for key, value in props.items():
        if key in _PASSED_KEYS:
            out[key] = value
        elif key == "sasl.jaas.config":
            try:
                entry = parse_jaas_config(value)
            except JaasConfigError as exc:
                raise CommandUsageError(f"{path}: {exc}") from None
            if entry.username is None or entry.password is None:
                raise CommandUsageError(
                    f"{path}: expected username and password in sasl.jaas.config"
                )
            out["sasl.username"], out["sasl.password"] = entry.username, entry.password
        elif key == "ssl.truststore.location":
            if props.get("ssl.truststore.type", "JKS").upper() != "PEM":
                raise CommandUsageError(
                    f"{path}: expected ssl.truststore.type=PEM (librdkafka reads PEM only)"
                )
            out["ssl.ca.location"] = value
        elif key not in _IGNORED_KEYS:
            raise CommandUsageError(
                f"{path}: {key} is not a client security setting sluice knows "
                f"(expected some of {', '.join(sorted(_PASSED_KEYS | {'sasl.jaas.config'}))})"
            )
    return out


def _admin(args: argparse.Namespace) -> Any:
    """An AdminClient, after checking that the cluster answers (exit 3 when it does not)."""
    try:
        admin = AdminClient(client_config(args.bootstrap_server,
                                          **command_config(args.command_config)))  # fmt: skip
    except KafkaException as exc:
        raise CommandUsageError(f"--command-config: {exc.args[0].str()}") from None
    try:
        admin.list_topics(timeout=10)
    except KafkaException as exc:
        raise_for_kafka(exc, "cannot reach the cluster", args.bootstrap_server)
    return admin


# -- the bindings ------------------------------------------------------------------------------


def _resources(args: argparse.Namespace) -> list[Resource]:
    found: list[Resource] = [(ResourceType.TOPIC, t) for t in args.topic]
    found += [(ResourceType.GROUP, g) for g in args.group]
    found += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        found.append((ResourceType.BROKER, CLUSTER_NAME))
    return found


def _pattern_type(args: argparse.Namespace, *, concrete: bool) -> ResourcePatternType:
    pattern = ResourcePatternType[args.resource_pattern_type.upper()]
    if concrete and pattern not in (ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED):
        raise CommandUsageError(
            f"--resource-pattern-type: expected literal or prefixed to add ACLs, found "
            f"{args.resource_pattern_type}"
        )
    return pattern


def _operations(args: argparse.Namespace) -> list[Op]:
    try:
        return [parse_enum(Op, text) for text in args.operation]
    except AclBindingError as exc:
        raise CommandUsageError(f"--operation: {exc}") from None


def _operations_by_resource(args: argparse.Namespace) -> dict[Resource, set[Op]]:
    """Each resource and its operations, from --operation or --producer / --consumer."""
    resources = _resources(args)
    explicit = _operations(args)
    if args.producer or args.consumer:
        if explicit:
            raise CommandUsageError("--operation cannot be combined with --producer/--consumer")
        if not args.topic:
            raise CommandUsageError("--producer and --consumer need --topic")
        if args.consumer and not args.group:
            raise CommandUsageError("--consumer needs --group")
        wanted: dict[Resource, set[Op]] = {}
        for resource in resources:
            kind = resource[0]
            ops = wanted.setdefault(resource, set())
            if args.producer and kind is ResourceType.TOPIC:
                ops |= {Op.WRITE, Op.DESCRIBE, Op.CREATE}
            if args.producer and kind is ResourceType.TRANSACTIONAL_ID:
                ops |= {Op.WRITE, Op.DESCRIBE}
            if args.consumer and kind is ResourceType.TOPIC:
                ops |= {Op.READ, Op.DESCRIBE}
            if args.consumer and kind is ResourceType.GROUP:
                ops |= {Op.READ}
        if args.producer and args.idempotent:
            wanted.setdefault((ResourceType.BROKER, CLUSTER_NAME), set()).add(Op.IDEMPOTENT_WRITE)
        return {r: ops for r, ops in wanted.items() if ops}
    ops = set(explicit or [Op.ALL])
    for kind, name in resources:
        unsupported = sorted(o.name for o in ops - _SUPPORTED[kind])
        if unsupported:
            raise CommandUsageError(
                f"--operation {', '.join(unsupported)} does not apply to {_TYPE_NAMES[kind]} "
                f"{name!r} (it takes {', '.join(sorted(o.name for o in _SUPPORTED[kind]))})"
            )
    return {resource: ops for resource in resources}


def _entries(args: argparse.Namespace) -> list[tuple[str, str, AclPermissionType]]:
    """(principal, host, permission) for every principal × host given."""
    entries = []
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
        (args.deny_principal, args.deny_host, AclPermissionType.DENY),
    ):
        for principal in principals:
            if ":" not in principal:
                raise CommandUsageError(
                    f"expected a principal of the form Type:name (User:alice), found {principal!r}"
                )
            entries += [(principal, host, permission) for host in hosts or ["*"]]
    return entries


def _show(bindings: Iterable[Any]) -> None:
    by_resource: dict[tuple[Any, str, Any], list[Any]] = {}
    for b in bindings:
        by_resource.setdefault((b.restype, b.name, b.resource_pattern_type), []).append(b)
    for (restype, name, pattern), found in sorted(
        by_resource.items(), key=lambda item: (item[0][0].value, item[0][1], item[0][2].value)
    ):
        print(
            f"Current ACLs for resource `ResourcePattern(resourceType="
            f"{_TYPE_NAMES.get(restype, restype.name)}, name={name}, "
            f"patternType={pattern.name})`: "
        )
        for b in sorted(found, key=lambda b: (b.principal, b.host, b.operation.value)):
            print(
                f" \t(principal={b.principal}, host={b.host}, operation={b.operation.name}, "
                f"permissionType={b.permission_type.name})"
            )
        print()


def _results(futures: dict[Any, Any], what: str, bootstrap: str) -> list[Any]:
    """Every future's result; each refusal printed, then one error (exit 1) if any."""
    results, failed = [], []
    for key, future in futures.items():
        try:
            results.append((key, future.result(timeout=TIMEOUT_S)))
        except KafkaException as exc:
            try:
                raise_for_kafka(exc, what, bootstrap)
            except CommandError as error:
                if error.exit_code != 1:
                    raise
                failed.append(f"{key}: {exc.args[0].str() if exc.args else exc}")
    if failed:
        raise CommandError(f"{what}: {len(failed)} refused:\n  " + "\n  ".join(failed))
    return results


# -- the actions -------------------------------------------------------------------------------


def acls_add(args: argparse.Namespace) -> int:
    pattern = _pattern_type(args, concrete=True)
    entries = _entries(args)
    if not entries:
        raise CommandUsageError("add needs --allow-principal or --deny-principal")
    wanted = _operations_by_resource(args)
    if not wanted:
        raise CommandUsageError("add needs a resource: --topic, --group, --transactional-id "
                                "or --cluster")  # fmt: skip
    bindings = [
        AclBinding(kind, name, pattern, principal, host, AclOperation(int(op)), permission)
        for (kind, name), ops in wanted.items()
        for op in sorted(ops)
        for principal, host, permission in entries
    ]
    admin = _admin(args)  # held: a collected client fails its futures
    for binding in bindings:
        print(f"Adding ACL {binding}")
    _results(admin.create_acls(bindings, request_timeout=TIMEOUT_S), "add ACLs",
             args.bootstrap_server)  # fmt: skip
    return 0


def acls_remove(args: argparse.Namespace) -> int:
    pattern = _pattern_type(args, concrete=False)
    resources = _resources(args)
    if not resources:
        raise CommandUsageError("remove needs a resource: --topic, --group, --transactional-id "
                                "or --cluster")  # fmt: skip
    entries = _entries(args)
    operations = _operations(args)
    if args.producer or args.consumer:
        by_resource = _operations_by_resource(args)
        resources = list(by_resource)
    filters = []
    for kind, name in resources:
        ops = by_resource[(kind, name)] if args.producer or args.consumer else set(operations)
        choices: list[tuple[str | None, str | None, AclPermissionType]] = list(entries) or [
            (None, None, AclPermissionType.ANY)
        ]
        for principal, host, permission in choices:
            op_choices: list[Op | None] = [*sorted(ops)] or [None]
            for op in op_choices:
                filters.append(
                    _Filter(
                        kind,
                        name,
                        pattern,
                        principal,
                        host,
                        AclOperation.ANY if op is None else AclOperation(int(op)),
                        permission,
                    )  # fmt: skip
                )
    admin = _admin(args)
    results = _results(admin.delete_acls(filters, request_timeout=TIMEOUT_S), "remove ACLs",
                       args.bootstrap_server)  # fmt: skip
    removed = [binding for _filter, deleted in results for binding in deleted]
    print(f"Removed {len(removed)} ACLs")
    _show(removed)
    return 0


def acls_list(args: argparse.Namespace) -> int:
    resources = _resources(args)
    pattern = _pattern_type(args, concrete=False)
    filters = [
        _Filter(kind, name, pattern, principal, None, AclOperation.ANY,
                         AclPermissionType.ANY)
        for kind, name in resources
        for principal in args.principal or [None]
    ] or [
        _Filter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None,
                         AclOperation.ANY, AclPermissionType.ANY)
        for principal in args.principal or [None]
    ]  # fmt: skip
    admin = _admin(args)
    found: dict[str, Any] = {}
    for acl_filter in filters:
        try:
            for binding in admin.describe_acls(acl_filter, request_timeout=TIMEOUT_S).result():
                found[str(binding)] = binding
        except KafkaException as exc:
            raise_for_kafka(exc, "list ACLs", args.bootstrap_server)
    if not found:
        _check_empty_listing(admin, args.bootstrap_server)
    _show(found.values())
    return 0


def _check_empty_listing(admin: Any, bootstrap: str) -> None:
    """librdkafka reports a refused or authorizer-less DescribeAcls as an empty success: ask
    a broker whether it has an authorizer at all (DescribeConfigs reports its errors)."""
    brokers = admin.list_topics(timeout=10).brokers
    resource = ConfigResource(ConfigResource.Type.BROKER, str(min(brokers)))
    try:
        configs = admin.describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result()
    except KafkaException as exc:
        raise CommandError(
            "list ACLs: none listed, and the broker's authorizer could not be checked "
            f"({exc.args[0].str() if exc.args else exc}): librdkafka does not report why a "
            "DescribeAcls answer is empty, so it may be a refusal (DESCRIBE on the cluster "
            "is needed)"
        ) from None
    entry = configs.get("authorizer.class.name")
    if entry is None or not entry.value:
        raise CommandError(
            "list ACLs: the broker has no authorizer (authorizer.class.name is not set): "
            "ACLs are not enforced and cannot be listed (SECURITY_DISABLED)"
        )
