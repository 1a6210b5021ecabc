"""``sluice groups list|describe|reset-offsets`` (Kafka's kafka-consumer-groups.sh).

``describe`` shows, per partition, the committed offset, the log end, the lag and the owning
member (from the group's current assignment), for classic groups and consumer groups
(KIP-848) alike, naming which the group is. ``reset-offsets`` moves a group's committed
offsets — to the earliest or latest offset, to the first offset at a time, to an offset, or
shifted — printing the plan; without ``--execute`` (or with ``--dry-run``) it changes nothing.
As in Kafka, a reset needs the group to have no active members: a running consumer would
overwrite it at its next commit.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from sluice.cli.errors import CommandError, raise_for_kafka
from sluice.cli.kafka_clients import client_config

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
# librdkafka's ConsumerGroupState names → the names Kafka's own tools print.
_KAFKA_STATE_NAMES = {
    "STABLE": "Stable",
    "EMPTY": "Empty",
    "DEAD": "Dead",
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
    "UNKNOWN": "Unknown",
}
# The group's protocol (librdkafka's ConsumerGroupType): classic (JoinGroup/SyncGroup) or
# consumer (KIP-848, group.protocol=consumer; described through ConsumerGroupDescribe, whose
# Assigning and Reconciling states librdkafka reports as Unknown).
_KINDS = {"CLASSIC": " (classic)", "CONSUMER": " (consumer)"}


def add_parser(sub: Any) -> Any:
    """Add ``groups``; return its actions for more (``delete``)."""
    groups = sub.add_parser("groups", help="list, describe and reset consumer groups")
    actions = groups.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="list consumer groups")
    listing.set_defaults(func=groups_list)
    describe = actions.add_parser("describe", help="offsets, lag and owners per partition")
    describe.add_argument("--group", required=True)
    describe.set_defaults(func=groups_describe)
    reset = actions.add_parser("reset-offsets", help="move a stopped group's committed offsets")
    reset.add_argument("--group", required=True)
    reset.add_argument("--topic", required=True, help="a topic, or topic:0,1 for partitions")
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-datetime", help="ISO time, e.g. 2026-11-21T00:00:00")
    to.add_argument("--to-offset", type=int)
    to.add_argument("--shift-by", type=int)
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="show the plan only (default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    reset.set_defaults(func=groups_reset)
    for p in (listing, describe, reset):
        p.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP)
    return actions


def _admin(args: argparse.Namespace) -> Any:
    """An AdminClient, after checking that the cluster answers (exit 3 when it does not)."""
    admin = AdminClient(client_config(args.bootstrap_server))
    try:
        admin.list_topics(timeout=10)
    except KafkaException as exc:
        raise_for_kafka(exc, "cannot reach the cluster", args.bootstrap_server)
    return admin


def _consumer(args: argparse.Namespace) -> Any:
    return Consumer(client_config(args.bootstrap_server, **{"group.id": args.group,
                    "enable.auto.commit": False}))  # fmt: skip


def groups_list(args: argparse.Namespace) -> int:
    admin = _admin(args)  # keep a reference: a collected client fails its futures
    result = admin.list_consumer_groups().result(timeout=15)
    for g in sorted(result.valid, key=lambda g: g.group_id):
        print(g.group_id)
    return 0


def _committed(args: argparse.Namespace, admin: Any) -> list[Any]:
    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(args.group)])
    return list(futures[args.group].result(timeout=15).topic_partitions)


def groups_describe(args: argparse.Namespace) -> int:
    admin = _admin(args)
    description = admin.describe_consumer_groups([args.group])[args.group].result(timeout=15)
    owners: dict[tuple[str, int], str] = {}
    for member in description.members:
        for tp in member.assignment.topic_partitions if member.assignment else []:
            owners[(tp.topic, tp.partition)] = f"{member.member_id} ({member.host})"
    committed = {(tp.topic, tp.partition): tp.offset for tp in _committed(args, admin)}
    consumer = _consumer(args)
    try:
        state = _KAFKA_STATE_NAMES.get(
            getattr(description.state, "name", ""), str(description.state)
        )
        kind = _KINDS.get(getattr(getattr(description, "type", None), "name", ""), "")
        members = len(description.members)
        print(f"Group {args.group}{kind}: {state}, {members} members\n")
        header = f"{'TOPIC':<24} {'PARTITION':>9} {'CURRENT-OFFSET':>15} {'LOG-END-OFFSET':>15}"
        print(f"{header} {'LAG':>8}  OWNER")
        for topic, partition in sorted(set(committed) | set(owners)):
            _, end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            current = committed.get((topic, partition), -1)
            lag = end - current if current >= 0 else "-"
            shown = current if current >= 0 else "-"
            owner = owners.get((topic, partition), "-")
            print(f"{topic:<24} {partition:>9} {shown:>15} {end:>15} {lag:>8}  {owner}")
    finally:
        consumer.close()
    return 0


def _partitions(args: argparse.Namespace, consumer: Any) -> list[int]:
    topic, _, parts = args.topic.partition(":")
    if parts:
        return [int(p) for p in parts.split(",")]
    md = consumer.list_topics(topic, timeout=10).topics[topic]
    if md.error is not None:
        raise CommandError(f"topic {topic!r}: {md.error.str()}")
    return sorted(md.partitions)


def groups_reset(args: argparse.Namespace) -> int:
    admin = _admin(args)
    description = admin.describe_consumer_groups([args.group])[args.group].result(timeout=15)
    if description.members:
        raise CommandError(
            f"group {args.group} has {len(description.members)} active members: stop them "
            "before resetting offsets (they would overwrite the reset)"
        )
    topic = args.topic.partition(":")[0]
    consumer = _consumer(args)
    try:
        partitions = _partitions(args, consumer)
        committed = {tp.partition: tp.offset
                     for tp in consumer.committed([TopicPartition(topic, p) for p in partitions],
                                                  timeout=10)}  # fmt: skip
        if args.to_datetime:
            ms = int(datetime.fromisoformat(args.to_datetime).timestamp() * 1000)
            found = consumer.offsets_for_times(
                [TopicPartition(topic, p, ms) for p in partitions], timeout=10
            )
            by_time = {tp.partition: tp.offset for tp in found}
        plan = []
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if args.to_earliest:
                new = low
            elif args.to_latest:
                new = high
            elif args.to_datetime:
                new = by_time[p] if by_time[p] >= 0 else high
            elif args.to_offset is not None:
                new = args.to_offset
            else:
                base = committed[p] if committed[p] >= 0 else low
                new = base + args.shift_by
            new = min(max(new, low), high)  # Kafka clamps into the log too
            plan.append((p, committed[p], new))
        print(f"{'TOPIC':<24} {'PARTITION':>9} {'OLD-OFFSET':>11} {'NEW-OFFSET':>11}")
        for p, old, new in plan:
            print(f"{topic:<24} {p:>9} {old if old >= 0 else '-':>11} {new:>11}")
        if not args.execute:
            print("\n(dry run: nothing changed; add --execute to commit these offsets)")
            return 0
        consumer.commit(offsets=[TopicPartition(topic, p, new) for p, _, new in plan],
                        asynchronous=False)  # fmt: skip
        print(f"\nCommitted new offsets for group {args.group}.")
        return 0
    finally:
        consumer.close()
