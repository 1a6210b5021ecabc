"""Client-side subcommands on confluent-kafka, after Kafka's scripts:

``sluice topics create|list|describe|delete`` (kafka-topics.sh), ``sluice produce``
(kafka-console-producer.sh: one message per stdin line, optional key separator) and
``sluice consume`` (kafka-console-consumer.sh: from the beginning, an offset or a time); with
``--value-format avro|json-schema|protobuf`` they are kafka-avro-console-producer/-consumer
and their JSON Schema and Protobuf siblings (JSON lines in and out, Confluent-framed through
the registry: ``sluice.cli.value_formats``).

Honest by construction: reading commands never create a topic (``describe`` asks with
DescribeTopics, whose Metadata request does not allow auto-creation, as Kafka's tool does);
``produce`` exits non-zero unless every message was acknowledged, and says how many were not;
an unreachable cluster is exit 3 (``sluice.cli.errors``).
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
)

from sluice.cli.errors import (
    CommandError,
    CommandUsageError,
    ServiceUnreachableError,
    raise_for_kafka,
    unreachable,
)
from sluice.cli.kafka_clients import client_config
from sluice.cli.value_formats import add_value_format_arguments, value_format

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
# How long a command waits for the cluster before it says it could not reach it.
REQUEST_TIMEOUT_S = 10.0


def _bootstrap(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, help="host:port[,...]")


def add_parsers(sub: Any) -> Any:
    """Add topics, produce, consume; return the ``topics`` actions for more (``alter``)."""
    topics = sub.add_parser("topics", help="create, list, describe and delete topics")
    actions = topics.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="create a topic")
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int, default=-1, help="-1: the broker's default")
    create.add_argument("--replication-factor", type=int, default=-1,
                        help="-1: the broker's default")  # fmt: skip
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a topic config (repeatable)")  # fmt: skip
    create.set_defaults(func=topics_create)
    listing = actions.add_parser("list", help="list topic names")
    listing.set_defaults(func=topics_list)
    describe = actions.add_parser("describe", help="partitions, leaders, replicas and ISR")
    describe.add_argument("--topic", help="one topic (default: every topic)")
    describe.set_defaults(func=topics_describe)
    delete = actions.add_parser("delete", help="delete a topic")
    delete.add_argument("--topic", required=True)
    delete.set_defaults(func=topics_delete)
    for p in (create, listing, describe, delete):
        _bootstrap(p)

    produce = sub.add_parser("produce", help="produce stdin lines as messages")
    _bootstrap(produce)
    produce.add_argument("--topic", required=True)
    produce.add_argument("--key-separator", help="split each line into key and value here")
    produce.add_argument("--acks", default="all")
    produce.add_argument("--compression", default="none")
    produce.add_argument("--timeout-ms", type=int, default=30_000,
                         help="give up on a message not acknowledged after this long")  # fmt: skip
    add_value_format_arguments(produce, producing=True)
    produce.set_defaults(func=produce_lines)

    consume = sub.add_parser("consume", help="print messages of a topic")
    _bootstrap(consume)
    consume.add_argument("--topic", required=True)
    consume.add_argument("--partition", type=int, action="append")
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true")
    start.add_argument("--offset", type=int)
    start.add_argument("--from-time", help="ISO time or epoch milliseconds")
    consume.add_argument("--max-messages", type=int)
    consume.add_argument("--group", help="commit offsets under this group")
    consume.add_argument("--timeout-ms", type=int, default=10_000,
                         help="stop after this long without a message")  # fmt: skip
    consume.add_argument("--print-key", action="store_true")
    add_value_format_arguments(consume, producing=False)
    consume.set_defaults(func=consume_messages)
    return actions


def _admin(args: argparse.Namespace) -> Any:
    return AdminClient(client_config(args.bootstrap_server))


def _config_pairs(items: list[str]) -> dict[str, str]:
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CommandUsageError(f"--config: expected KEY=VALUE, found {item!r}")
        pairs[key.strip()] = value.strip()
    return pairs


def _check_reachable(admin: Any, bootstrap: str) -> None:
    """Fail with exit 3 when no broker answers (before a request whose future would hang)."""
    try:
        admin.list_topics(timeout=REQUEST_TIMEOUT_S)
    except KafkaException as exc:
        raise_for_kafka(exc, "cannot reach the cluster", bootstrap)


def topics_create(args: argparse.Namespace) -> int:
    config = _config_pairs(args.config)
    new = NewTopic(args.topic, args.partitions, args.replication_factor, config=config)
    admin = _admin(args)  # keep a reference: a collected client fails its futures
    _check_reachable(admin, args.bootstrap_server)
    for topic, future in admin.create_topics([new]).items():
        try:
            future.result()
            print(f"Created topic {topic}.")
        except Exception as exc:  # confluent-kafka raises KafkaException
            print(f"Error creating topic {topic}: {exc}", file=sys.stderr)
            return 1
    return 0


def topics_list(args: argparse.Namespace) -> int:
    admin = _admin(args)
    try:
        topics = admin.list_topics(timeout=REQUEST_TIMEOUT_S).topics
    except KafkaException as exc:
        raise_for_kafka(exc, "cannot list topics", args.bootstrap_server)
    for name in sorted(topics):
        print(name)
    return 0


def topics_describe(args: argparse.Namespace) -> int:
    """Kafka's ``--describe`` layout. A missing topic is an error, never created."""
    admin = _admin(args)
    try:
        names = (
            [args.topic]
            if args.topic
            else sorted(admin.list_topics(timeout=REQUEST_TIMEOUT_S).topics)
        )
    except KafkaException as exc:
        raise_for_kafka(exc, "cannot list topics", args.bootstrap_server)
    if not names:
        return 0
    _check_reachable(admin, args.bootstrap_server)
    futures = admin.describe_topics(TopicCollection(names), request_timeout=REQUEST_TIMEOUT_S)
    for name in names:
        try:
            description = futures[name].result()
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise CommandError(f"topic {name!r} does not exist") from exc
            raise_for_kafka(exc, f"cannot describe topic {name!r}", args.bootstrap_server)
        partitions = sorted(description.partitions, key=lambda p: p.id)
        replication = len(partitions[0].replicas) if partitions else 0
        configs = ",".join(f"{k}={v}" for k, v in sorted(_dynamic_configs(admin, name).items()))
        print(f"Topic: {name}\tPartitionCount: {len(partitions)}\t"
              f"ReplicationFactor: {replication}\tConfigs: {configs}")  # fmt: skip
        for p in partitions:
            leader = p.leader.id if p.leader is not None else -1
            replicas = ",".join(str(r.id) for r in p.replicas)
            isr = ",".join(str(r.id) for r in p.isr)
            print(f"\tTopic: {name}\tPartition: {p.id}\tLeader: {leader}\t"
                  f"Replicas: {replicas}\tIsr: {isr}")  # fmt: skip
    return 0


def _dynamic_configs(admin: Any, topic: str) -> dict[str, str]:
    """The topic's non-default configs, as kafka-topics.sh --describe prints them."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    (future,) = admin.describe_configs([resource], request_timeout=REQUEST_TIMEOUT_S).values()
    entries = future.result(timeout=REQUEST_TIMEOUT_S)
    return {
        e.name: ("null" if e.is_sensitive else e.value)
        for e in entries.values()
        if not e.is_default
    }


def topics_delete(args: argparse.Namespace) -> int:
    admin = _admin(args)  # keep a reference: a collected client fails its futures
    _check_reachable(admin, args.bootstrap_server)
    for topic, future in admin.delete_topics([args.topic]).items():
        try:
            future.result()
            print(f"Deleted topic {topic}.")
        except Exception as exc:
            print(f"Error deleting topic {topic}: {exc}", file=sys.stderr)
            return 1
    return 0


def produce_lines(args: argparse.Namespace) -> int:
    """One message per stdin line; exit 0 only when every one was acknowledged."""
    errors: list[KafkaError] = []
    delivered = 0

    def report(err: KafkaError | None, _msg: Any) -> None:
        nonlocal delivered
        if err is None:
            delivered += 1
        else:
            errors.append(err)

    encoding = value_format(args, producing=True)
    producer = Producer(client_config(args.bootstrap_server, **{"acks": args.acks,
                         "compression.type": args.compression,
                         "message.timeout.ms": args.timeout_ms}))  # fmt: skip
    count = 0
    for line in sys.stdin:
        line = line.rstrip("\n")
        key: str | None = None
        if args.key_separator and args.key_separator in line:
            key, line = line.split(args.key_separator, 1)
        value = encoding.encode(line, count + 1)
        producer.produce(args.topic, value=value, key=key.encode() if key else None,
                         on_delivery=report)  # fmt: skip
        producer.poll(0)
        count += 1
    # flush() returns how many are still queued: never acknowledged, never failed either.
    queued = producer.flush(args.timeout_ms / 1000 + 5)
    if delivered == count:
        print(f"Produced {count} messages to {args.topic}.", file=sys.stderr)
        return 0
    failed = count - delivered
    detail = f"first error: {errors[0].str()}" if errors else f"{queued} still queued"
    message = f"{failed} of {count} messages to {args.topic} were not delivered ({detail})"
    if delivered == 0 and (not errors or all(unreachable(e) for e in errors)):
        raise ServiceUnreachableError(
            f"{message}: no broker of {args.bootstrap_server} acknowledged any"
        )
    raise CommandError(message)


def _start_time_ms(text: str) -> int:
    if text.isdigit():
        return int(text)
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def consume_messages(args: argparse.Namespace) -> int:
    decoding = value_format(args, producing=False)
    consumer = Consumer({
        **client_config(args.bootstrap_server),
        "group.id": args.group or f"sluice-console-{int(time.time())}",
        "enable.auto.commit": bool(args.group),
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
    })  # fmt: skip
    try:
        try:
            md = consumer.list_topics(args.topic, timeout=REQUEST_TIMEOUT_S).topics[args.topic]
        except KafkaException as exc:
            raise_for_kafka(exc, f"cannot read topic {args.topic!r}", args.bootstrap_server)
        if md.error is not None:
            raise CommandError(f"topic {args.topic!r}: {md.error.str()}")
        partitions = args.partition or sorted(md.partitions)
        if args.offset is not None:
            start = args.offset
        elif args.from_beginning:
            start = OFFSET_BEGINNING
        else:
            start = OFFSET_END
        assignment = [TopicPartition(args.topic, p, start) for p in partitions]
        if args.from_time:
            wanted = [TopicPartition(args.topic, p, _start_time_ms(args.from_time))
                      for p in partitions]  # fmt: skip
            assignment = consumer.offsets_for_times(wanted, timeout=10)
        elif args.group and args.offset is None and not args.from_beginning:
            committed = consumer.committed(assignment, timeout=10)
            assignment = [
                c if c.offset >= 0 else TopicPartition(args.topic, c.partition, OFFSET_END)
                for c in committed
            ]
        consumer.assign(assignment)
        seen = 0
        last = time.monotonic()
        while args.max_messages is None or seen < args.max_messages:
            msg = consumer.poll(0.2)
            if msg is None:
                if (time.monotonic() - last) * 1000 > args.timeout_ms:
                    break
                continue
            if msg.error():
                print(f"error: {msg.error()}", file=sys.stderr)
                continue
            last = time.monotonic()
            seen += 1
            raw_value, raw_key = msg.value(), msg.key()
            value = decoding.decode(raw_value)
            if args.print_key:
                key = raw_key.decode(errors="replace") if raw_key is not None else "null"
                print(f"{key}\t{value}")
            else:
                print(value)
        if args.group and seen:
            consumer.commit(asynchronous=False)
        print(f"Processed a total of {seen} messages", file=sys.stderr)
        return 0
    finally:
        consumer.close()
