"""Admin subcommands after Kafka's tools, on confluent-kafka's AdminClient.

=========================================================  ==================================
``sluice configs describe --entity-type topics|brokers``   kafka-configs.sh --describe
``sluice configs alter --entity-type topics|brokers|users`` kafka-configs.sh --alter
(``--entity-name N``, or ``--entity-default`` for every broker's dynamic default)
``sluice topics alter --topic T --partitions N``           kafka-topics.sh --alter
``sluice groups delete --group G``                         kafka-consumer-groups.sh --delete
``sluice get-offsets --topic T [--time -1|-2|MS]``         kafka-get-offsets.sh
``sluice delete-records --offset-json-file F``             kafka-delete-records.sh
=========================================================  ==================================

``--add-config`` takes Kafka's syntax: ``k1=v1,k2=[a,b],k3=v3`` (square brackets keep commas
in a value); for ``--entity-type users`` the SCRAM form
``SCRAM-SHA-256=[iterations=8192,password=secret]``, and ``--delete-config SCRAM-SHA-256``.
Passwords are sent to the broker and never printed.

``--entity-type brokers --entity-default`` names the cluster-wide default (resource ``""``),
which librdkafka refuses to name: those two requests (IncrementalAlterConfigs v0,
DescribeConfigs v1) are sent over one plain connection to the first bootstrap server, with
Sluice's own codec (``sluice.broker.protocol``); the other commands use confluent-kafka.
Every command reports per resource and exits non-zero (``sluice.cli.errors``) if any part failed.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    OffsetSpec,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from sluice.broker.protocol import ApiKey, decode_response, encode_request
from sluice.broker.protocol.apis import request_type
from sluice.broker.protocol.build import build
from sluice.broker.protocol.errors import Errors
from sluice.cli.errors import (
    CommandError,
    CommandUsageError,
    ServiceUnreachableError,
    raise_for_kafka,
)
from sluice.cli.kafka_clients import client_config

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
TIMEOUT_S = 15.0
ENTITY_TYPES = {"topics": ConfigResource.Type.TOPIC, "brokers": ConfigResource.Type.BROKER}
SCRAM_MECHANISMS = {
    "SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
    "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512,
}
DEFAULT_SCRAM_ITERATIONS = 4096


def add_parsers(sub: Any, topics_actions: Any, groups_actions: Any) -> None:
    """``configs``, ``get-offsets``, ``delete-records``; ``topics alter``; ``groups delete``."""
    configs = sub.add_parser("configs", help="describe and alter topic, broker and user configs")
    actions = configs.add_subparsers(dest="action", required=True, metavar="ACTION")
    describe = actions.add_parser("describe", help="show a topic's or broker's configs")
    alter = actions.add_parser("alter", help="set or delete configs (incremental)")
    for p in (describe, alter):
        p.add_argument("--entity-type", required=True, choices=["topics", "brokers", "users"])
        entity = p.add_mutually_exclusive_group(required=True)
        entity.add_argument("--entity-name")
        entity.add_argument(
            "--entity-default", action="store_true", help="every broker's dynamic default"
        )
        _bootstrap(p)
    describe.add_argument("--all", action="store_true", help="every config, defaults included")
    describe.set_defaults(func=configs_describe)
    alter.add_argument("--add-config", default="", metavar="K=V,K2=[A,B]")
    alter.add_argument("--delete-config", default="", metavar="K,K2")
    alter.set_defaults(func=configs_alter)

    topics_alter = topics_actions.add_parser("alter", help="add partitions to a topic")
    topics_alter.add_argument("--topic", required=True)
    topics_alter.add_argument("--partitions", type=int, required=True, help="the new total")
    _bootstrap(topics_alter)
    topics_alter.set_defaults(func=topics_add_partitions)

    groups_delete = groups_actions.add_parser("delete", help="delete an empty group")
    groups_delete.add_argument("--group", required=True, action="append")
    _bootstrap(groups_delete)
    groups_delete.set_defaults(func=groups_delete_command)

    offsets = sub.add_parser("get-offsets", help="offsets per partition (kafka-get-offsets)")
    offsets.add_argument("--topic", required=True)
    offsets.add_argument("--partitions", help="comma-separated (default: all)")
    offsets.add_argument("--time", default="-1",
                         help="-1 latest, -2 earliest, -3 max timestamp, or epoch ms")  # fmt: skip
    _bootstrap(offsets)
    offsets.set_defaults(func=get_offsets)

    records = sub.add_parser("delete-records", help="move log start offsets forward")
    source = records.add_mutually_exclusive_group(required=True)
    source.add_argument("--offset-json-file", type=Path,
                        help='{"partitions":[{"topic":"t","partition":0,"offset":5}]}')  # fmt: skip
    source.add_argument("--topic")
    records.add_argument("--partition", type=int, default=0)
    records.add_argument("--offset", type=int, help="delete everything before this offset")
    _bootstrap(records)
    records.set_defaults(func=delete_records)


def _bootstrap(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, help="host:port[,...]")


def _admin(args: argparse.Namespace) -> Any:
    admin = AdminClient(client_config(args.bootstrap_server))
    try:
        admin.list_topics(timeout=10)
    except KafkaException as exc:
        raise_for_kafka(exc, "cannot reach the cluster", args.bootstrap_server)
    return admin


def _result(future: Any, what: str, bootstrap: str) -> Any:
    try:
        return future.result(timeout=TIMEOUT_S)
    except KafkaException as exc:
        raise_for_kafka(exc, what, bootstrap)


def parse_config_list(text: str) -> dict[str, str]:
    """Kafka's ``k1=v1,k2=[a,b]`` into a dict; brackets keep commas, and are removed."""
    pairs: dict[str, str] = {}
    depth, start, items = 0, 0, []
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise CommandUsageError("--add-config: expected matching [ and ], found an open bracket")
    items.append(text[start:])
    for item in (i.strip() for i in items):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CommandUsageError(f"--add-config: expected KEY=VALUE, found {key.strip()!r}")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        pairs[key.strip()] = value
    return pairs


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def configs_describe(args: argparse.Namespace) -> int:
    if args.entity_default:
        return _describe_broker_default(args)
    if args.entity_type == "users":
        return _describe_users(args)
    admin = _admin(args)
    resource = ConfigResource(ENTITY_TYPES[args.entity_type], args.entity_name)
    (future,) = admin.describe_configs([resource], request_timeout=TIMEOUT_S).values()
    entries = _result(future, f"cannot describe {args.entity_type} {args.entity_name}",
                      args.bootstrap_server)  # fmt: skip
    shown = [e for e in entries.values() if args.all or not e.is_default]
    kind = "topic" if args.entity_type == "topics" else "broker"
    print(f"{'All' if args.all else 'Dynamic'} configs for {kind} {args.entity_name} are:")
    for entry in sorted(shown, key=lambda e: e.name):
        value = "null" if entry.is_sensitive else entry.value
        # confluent-kafka gives the source as its int; print Kafka's name for it.
        source = ConfigSource(entry.source).name
        print(f"  {entry.name}={value} sensitive={str(entry.is_sensitive).lower()} "
              f"source={source}")  # fmt: skip
    return 0


def configs_alter(args: argparse.Namespace) -> int:
    added = parse_config_list(args.add_config)
    deleted = _names(args.delete_config)
    if not added and not deleted:
        raise CommandUsageError("configs alter: expected --add-config or --delete-config")
    if args.entity_default:
        return _alter_broker_default(args, added, deleted)
    if args.entity_type == "users":
        return _alter_users(args, added, deleted)
    admin = _admin(args)
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
               for k, v in added.items()]  # fmt: skip
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                for k in deleted]  # fmt: skip
    resource = ConfigResource(ENTITY_TYPES[args.entity_type], args.entity_name,
                              incremental_configs=entries)  # fmt: skip
    (future,) = admin.incremental_alter_configs([resource]).values()
    _result(future, f"cannot alter {args.entity_type} {args.entity_name}", args.bootstrap_server)
    print(f"Completed updating config for {args.entity_type[:-1]} {args.entity_name}.")
    return 0


# -- the brokers' default, over Sluice's codec -----------------------------------------------------

BROKER_RESOURCE = 4  # ConfigResource.Type.BROKER
_SIZE = struct.Struct(">i")


def _check_default(args: argparse.Namespace) -> None:
    if args.entity_type != "brokers":
        raise CommandUsageError("--entity-default: expected --entity-type brokers")


def _call(bootstrap: str, api_key: int, version: int, values: dict[str, Any]) -> Any:
    """One request to the first server of ``bootstrap`` over a plain connection; the decoded
    response body."""
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    frame = encode_request(1, "sluice-cli", build(request_type(api_key, version), values))
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)),
                                      timeout=TIMEOUT_S) as sock:  # fmt: skip
            sock.sendall(frame)
            reader = sock.makefile("rb")
            prefix = reader.read(4)
            answer = reader.read(_SIZE.unpack(prefix)[0]) if len(prefix) == 4 else b""
    except (OSError, ValueError) as exc:
        raise ServiceUnreachableError(f"cannot reach {bootstrap}: {exc}") from None
    if not answer:
        raise ServiceUnreachableError(f"{bootstrap} closed the connection without answering")
    return decode_response(answer, api_key, version)[1]


def _raise_for_code(code: int, message: str | None, what: str) -> None:
    if code != Errors.NONE:
        raise CommandError(f"{what}: {Errors(code).name}: {message or ''}".rstrip(": "))


def _describe_broker_default(args: argparse.Namespace) -> int:
    _check_default(args)
    body = {"resources": [{"resource_type": BROKER_RESOURCE, "resource_name": "",
                           "configuration_keys": None}]}  # fmt: skip
    result = _call(args.bootstrap_server, ApiKey.DESCRIBE_CONFIGS, 1, body).results[0]
    _raise_for_code(int(result.error_code), result.error_message,
                    "cannot describe the brokers' default")  # fmt: skip
    print("Default configs for brokers in the cluster are:")
    for entry in sorted(result.configs, key=lambda e: e.name):
        value = "null" if entry.is_sensitive else entry.value
        print(f"  {entry.name}={value} sensitive={str(entry.is_sensitive).lower()} "
              f"source=DYNAMIC_DEFAULT_BROKER_CONFIG")  # fmt: skip
    return 0


def _alter_broker_default(
    args: argparse.Namespace, added: dict[str, str], deleted: list[str]
) -> int:
    _check_default(args)
    ops = [{"name": k, "config_operation": 0, "value": v} for k, v in added.items()]
    ops += [{"name": k, "config_operation": 1, "value": None} for k in deleted]
    body = {"resources": [{"resource_type": BROKER_RESOURCE, "resource_name": "",
                           "configs": ops}], "validate_only": False}  # fmt: skip
    result = _call(args.bootstrap_server, ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, body).responses[0]
    _raise_for_code(int(result.error_code), result.error_message,
                    "cannot alter the brokers' default")  # fmt: skip
    print("Completed updating default config for brokers in the cluster.")
    return 0


def _describe_users(args: argparse.Namespace) -> int:
    admin = _admin(args)
    futures = admin.describe_user_scram_credentials([args.entity_name])
    description = _result(futures[args.entity_name], f"cannot describe user {args.entity_name}",
                          args.bootstrap_server)  # fmt: skip
    for info in description.scram_credential_infos:
        name = info.mechanism.name.replace("_", "-")
        print(f"{name}=iterations={info.iterations}")
    return 0


def _alter_users(args: argparse.Namespace, added: dict[str, str], deleted: list[str]) -> int:
    """``SCRAM-SHA-256=[iterations=N,password=P]`` upserts; ``--delete-config`` deletes."""
    alterations: list[Any] = []
    for key, value in added.items():
        mechanism = SCRAM_MECHANISMS.get(key.upper())
        if mechanism is None:
            raise CommandUsageError(f"--add-config for users: expected one of "
                                    f"{', '.join(SCRAM_MECHANISMS)}, found {key!r}")  # fmt: skip
        settings = dict(part.partition("=")[::2] for part in value.split(",") if part)
        password = settings.get("password")
        if not password:
            raise CommandUsageError(f"{key}: expected password=..., found none")
        iterations = settings.get("iterations", str(DEFAULT_SCRAM_ITERATIONS))
        if not iterations.isdigit():
            raise CommandUsageError(f"{key}: expected iterations=<number>, found {iterations!r}")
        alterations.append(UserScramCredentialUpsertion(
            args.entity_name, ScramCredentialInfo(mechanism, int(iterations)), password.encode()
        ))  # fmt: skip
    for key in deleted:
        mechanism = SCRAM_MECHANISMS.get(key.upper())
        if mechanism is None:
            raise CommandUsageError(f"--delete-config for users: expected one of "
                                    f"{', '.join(SCRAM_MECHANISMS)}, found {key!r}")  # fmt: skip
        alterations.append(UserScramCredentialDeletion(args.entity_name, mechanism))
    admin = _admin(args)
    for user, future in admin.alter_user_scram_credentials(alterations).items():
        _result(future, f"cannot alter the credentials of user {user}", args.bootstrap_server)
    print(f"Completed updating config for user {args.entity_name}.")
    return 0


def topics_add_partitions(args: argparse.Namespace) -> int:
    admin = _admin(args)
    futures = admin.create_partitions([NewPartitions(args.topic, args.partitions)])
    _result(futures[args.topic], f"cannot add partitions to {args.topic!r}", args.bootstrap_server)
    print(f"Topic {args.topic} now has {args.partitions} partitions.")
    return 0


def groups_delete_command(args: argparse.Namespace) -> int:
    admin = _admin(args)
    failed = []
    for group, future in admin.delete_consumer_groups(args.group).items():
        try:
            future.result(timeout=TIMEOUT_S)
            print(f"Deleted consumer group {group}.")
        except KafkaException as exc:
            failed.append(f"{group}: {exc.args[0].str() if exc.args else exc}")
    if failed:
        raise CommandError(f"{len(failed)} of {len(args.group)} groups not deleted ("
                           + "; ".join(failed) + ")")  # fmt: skip
    return 0


# kafka-get-offsets.sh's special --time values; OffsetSpec's factories are untyped.
_SPECS: dict[str, Any] = {"-1": "latest", "-2": "earliest", "-3": "max_timestamp"}


def _offset_spec(text: str) -> Any:
    if text in _SPECS:
        return getattr(OffsetSpec, _SPECS[text])()
    if text.isdigit():
        return OffsetSpec.for_timestamp(int(text))
    raise CommandUsageError(f"--time: expected -1, -2, -3 or epoch milliseconds, found {text!r}")


def get_offsets(args: argparse.Namespace) -> int:
    spec = _offset_spec(args.time)
    admin = _admin(args)
    if args.partitions:
        partitions = [int(p) for p in _names(args.partitions)]
    else:
        topics = admin.list_topics(topic=args.topic, timeout=10).topics
        metadata = topics.get(args.topic)
        if metadata is None or metadata.error is not None:
            raise CommandError(f"topic {args.topic!r} does not exist")
        partitions = sorted(metadata.partitions)
    futures = admin.list_offsets({TopicPartition(args.topic, p): spec for p in partitions},
                                 request_timeout=TIMEOUT_S)  # fmt: skip
    for tp in sorted(futures, key=lambda t: t.partition):
        info = _result(futures[tp], f"cannot list offsets of {tp.topic}:{tp.partition}",
                       args.bootstrap_server)  # fmt: skip
        print(f"{tp.topic}:{tp.partition}:{info.offset}")
    return 0


def delete_records(args: argparse.Namespace) -> int:
    if args.offset_json_file is not None:
        try:
            plan = json.loads(args.offset_json_file.read_text())
            targets = [TopicPartition(p["topic"], int(p["partition"]), int(p["offset"]))
                       for p in plan["partitions"]]  # fmt: skip
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CommandUsageError(
                f"{args.offset_json_file}: expected "
                '{"partitions": [{"topic": T, "partition": P, "offset": O}]}, '
                f"found {type(exc).__name__}: {exc}"
            ) from None
    else:
        if args.offset is None:
            raise CommandUsageError("delete-records --topic: expected --offset")
        targets = [TopicPartition(args.topic, args.partition, args.offset)]
    admin = _admin(args)
    futures = admin.delete_records(targets, request_timeout=TIMEOUT_S)
    for tp in sorted(futures, key=lambda t: (t.topic, t.partition)):
        result = _result(futures[tp], f"cannot delete records of {tp.topic}:{tp.partition}",
                         args.bootstrap_server)  # fmt: skip
        low = getattr(result, "low_watermark", getattr(result, "offset", "?"))
        print(f"{tp.topic}:{tp.partition} low watermark {low}")
    return 0
