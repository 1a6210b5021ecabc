"""Client-side subcommands on confluent-kafka, after Kafka's scripts:

``sluice topics create|list|describe|delete`` (kafka-topics.sh), ``sluice produce``
(kafka-console-producer.sh: one message per stdin line, optional key separator) and
``sluice consume`` (kafka-console-consumer.sh: from the beginning, an offset or a time).
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime
from typing import Any

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def _bootstrap(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP)


def add_parsers(sub: Any) -> None:
    topics = sub.add_parser("topics", help="create, list, describe and delete topics")
    actions = topics.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser("create")
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int, default=-1)
    create.add_argument("--replication-factor", type=int, default=-1)
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    create.set_defaults(func=topics_create)
    listing = actions.add_parser("list")
    listing.set_defaults(func=topics_list)
    describe = actions.add_parser("describe")
    describe.add_argument("--topic")
    describe.set_defaults(func=topics_describe)
    delete = actions.add_parser("delete")
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
    consume.set_defaults(func=consume_messages)


def _admin(args: argparse.Namespace) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": args.bootstrap_server})


def topics_create(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    config = dict(item.split("=", 1) for item in args.config)
    new = NewTopic(args.topic, args.partitions, args.replication_factor, config=config)
    admin = _admin(args)  # keep a reference: a collected client fails its futures
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
    for name in sorted(admin.list_topics(timeout=10).topics):
        print(name)
    return 0


def topics_describe(args: argparse.Namespace) -> int:
    admin = _admin(args)
    md = admin.list_topics(topic=args.topic, timeout=10)
    for name in sorted(md.topics):
        t = md.topics[name]
        if t.error is not None:
            print(f"Topic: {name}\tError: {t.error}", file=sys.stderr)
            return 1
        print(f"Topic: {name}\tPartitionCount: {len(t.partitions)}")
        for p in sorted(t.partitions.values(), key=lambda p: p.id):
            replicas = ",".join(map(str, p.replicas))
            isr = ",".join(map(str, p.isrs))
            print(f"\tTopic: {name}\tPartition: {p.id}\tLeader: {p.leader}\t"
                  f"Replicas: {replicas}\tIsr: {isr}")  # fmt: skip
    return 0


def topics_delete(args: argparse.Namespace) -> int:
    admin = _admin(args)  # keep a reference: a collected client fails its futures
    for topic, future in admin.delete_topics([args.topic]).items():
        try:
            future.result()
            print(f"Deleted topic {topic}.")
        except Exception as exc:
            print(f"Error deleting topic {topic}: {exc}", file=sys.stderr)
            return 1
    return 0


def produce_lines(args: argparse.Namespace) -> int:
    from confluent_kafka import Producer

    errors: list[str] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer({"bootstrap.servers": args.bootstrap_server, "acks": args.acks,
                         "compression.type": args.compression})  # fmt: skip
    count = 0
    for line in sys.stdin:
        line = line.rstrip("\n")
        key: str | None = None
        if args.key_separator and args.key_separator in line:
            key, line = line.split(args.key_separator, 1)
        producer.produce(args.topic, value=line.encode(), key=key.encode() if key else None,
                         on_delivery=report)  # fmt: skip
        producer.poll(0)
        count += 1
    producer.flush(30)
    if errors:
        print(f"{len(errors)} of {count} messages failed: {errors[0]}", file=sys.stderr)
        return 1
    print(f"Produced {count} messages to {args.topic}.", file=sys.stderr)
    return 0


def _start_time_ms(text: str) -> int:
    if text.isdigit():
        return int(text)
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def consume_messages(args: argparse.Namespace) -> int:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": args.bootstrap_server,
        "group.id": args.group or f"sluice-console-{int(time.time())}",
        "enable.auto.commit": bool(args.group),
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
    })  # fmt: skip
    try:
        md = consumer.list_topics(args.topic, timeout=10).topics[args.topic]
        if md.error is not None:
            print(f"Topic {args.topic}: {md.error}", file=sys.stderr)
            return 1
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
            value = raw_value.decode(errors="replace") if raw_value is not None else "null"
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
