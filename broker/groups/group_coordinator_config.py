"""``ConsumerGroupConfig`` and ``ShareGroupConfig``: the group coordinator's settings for
KIP-848 consumer groups (``group.protocol=consumer``) and KIP-932 share groups, under Kafka 4's
broker keys with Kafka's defaults and bounds (``GroupCoordinatorConfig``'s ``group.consumer.*``
and ``group.share.*``, ``ShareGroupConfig``'s record-lock and delivery-count keys).

Every key is declared once, in :data:`CONFIG_DEF` (the "groups" section of
``docs/configuration.md`` is generated from it); the broker's file sets them
(``BrokerConfig.consumer_groups`` / ``BrokerConfig.share_groups``).

Checks beyond each key's own range, as Kafka's constructors make them (a failure is one
:class:`GroupConfigError` naming the key, what was expected and what was found):

* each ``X`` of session timeout, heartbeat interval (both kinds of group), record-lock duration
  and delivery-count limit lies within its ``min.X`` and ``max.X``;
* a heartbeat interval is shorter than the session timeout of the same kind of group;
* ``group.share.max.share.sessions`` >= ``group.share.max.size``.

``group.consumer.assignors`` takes the names of the server-side assignors Sluice has —
``uniform`` and ``range`` — or Kafka's class names for them (a Kafka 3.x file names the
classes); the first is the default. ``group.consumer.migration.policy`` takes Kafka's four
values, but Sluice converts a group between the classic and the consumer protocol only when it
is empty (Kafka does that under every policy); a group with members is never converted online,
which is Kafka's ``disabled``, whatever the value.

Pure value objects; thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from sluice.broker.groups.consumer_assignors import ASSIGNORS
from sluice.common.config_def import Check, ConfigDef, OneOf, Range, Type

__all__ = [
    "CONFIG_DEF",
    "ConsumerGroupConfig",
    "GroupConfigError",
    "ShareGroupConfig",
]

#: Kafka's "no limit" (``Integer.MAX_VALUE``).
MAX_INT32: Final = 2_147_483_647

#: Kafka's class names of its built-in assignors → Sluice's assignor names.
KAFKA_ASSIGNOR_CLASSES: Final = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}

#: ``group.consumer.migration.policy``'s values (Kafka's ``ConsumerGroupMigrationPolicy``).
MIGRATION_POLICIES: Final = ("bidirectional", "upgrade", "downgrade", "disabled")


class GroupConfigError(ValueError):
    """A ``group.consumer.*`` or ``group.share.*`` key holds a value out of its range."""


def _check_assignors(value: tuple[str, ...]) -> str | None:
    wanted = ", ".join(ASSIGNORS) + " (or Kafka's class names for them)"
    if not value:
        return f"expected some of {wanted}, found none"
    unknown = [a for a in value if a not in ASSIGNORS and a not in KAFKA_ASSIGNOR_CLASSES]
    if unknown:
        return f"expected some of {wanted}, found {', '.join(unknown)}"
    names = [KAFKA_ASSIGNOR_CLASSES.get(a, a) for a in value]
    if len(set(names)) != len(names):
        return f"expected each assignor once, found {', '.join(value)}"
    return None


_AT_LEAST_1: Final = Range.at_least(1)

CONFIG_DEF: Final = (
    ConfigDef(error=GroupConfigError, what="broker configuration")
    .define(
        "group.consumer.session.timeout.ms", Type.INT, 45_000, _AT_LEAST_1,
        doc="A consumer group member (`group.protocol=consumer`) not heard from for this long "
        "is removed and its partitions reassigned.",
    )
    .define(
        "group.consumer.min.session.timeout.ms", Type.INT, 45_000, _AT_LEAST_1,
        doc="The lowest `group.consumer.session.timeout.ms` allowed.",
    )
    .define(
        "group.consumer.max.session.timeout.ms", Type.INT, 60_000, _AT_LEAST_1,
        doc="The highest `group.consumer.session.timeout.ms` allowed.",
    )
    .define(
        "group.consumer.heartbeat.interval.ms", Type.INT, 5_000, _AT_LEAST_1,
        doc="The heartbeat interval given to consumer group members (below the session timeout).",
    )
    .define(
        "group.consumer.min.heartbeat.interval.ms", Type.INT, 5_000, _AT_LEAST_1,
        doc="The lowest `group.consumer.heartbeat.interval.ms` allowed.",
    )
    .define(
        "group.consumer.max.heartbeat.interval.ms", Type.INT, 15_000, _AT_LEAST_1,
        doc="The highest `group.consumer.heartbeat.interval.ms` allowed.",
    )
    .define(
        "group.consumer.max.size", Type.INT, MAX_INT32, _AT_LEAST_1,
        doc="Members a consumer group may have; one more is refused GROUP_MAX_SIZE_REACHED "
        "(classic groups: `group.max.size`).",
    )
    .define(
        "group.consumer.assignors", Type.LIST, ("uniform", "range"),
        Check("uniform, range", _check_assignors),
        doc="The server-side assignors a member may name (`group.remote.assignor`); the first "
        "is used when none is named. Kafka's class names for the two are accepted.",
    )
    .define(
        "group.consumer.migration.policy", Type.STRING, "bidirectional",
        OneOf(*MIGRATION_POLICIES),
        doc="Kafka's online conversion of a classic group with members to a consumer group "
        "and back. Sluice converts only empty groups (as Kafka does under every value): a "
        "group with members behaves as `disabled` whatever the value.",
    )
    .define(
        "group.share.session.timeout.ms", Type.INT, 45_000, _AT_LEAST_1,
        doc="A share group member not heard from for this long is removed.",
    )
    .define(
        "group.share.min.session.timeout.ms", Type.INT, 45_000, _AT_LEAST_1,
        doc="The lowest `group.share.session.timeout.ms` allowed.",
    )
    .define(
        "group.share.max.session.timeout.ms", Type.INT, 60_000, _AT_LEAST_1,
        doc="The highest `group.share.session.timeout.ms` allowed.",
    )
    .define(
        "group.share.heartbeat.interval.ms", Type.INT, 5_000, _AT_LEAST_1,
        doc="The heartbeat interval given to share group members (below the session timeout).",
    )
    .define(
        "group.share.min.heartbeat.interval.ms", Type.INT, 5_000, _AT_LEAST_1,
        doc="The lowest `group.share.heartbeat.interval.ms` allowed.",
    )
    .define(
        "group.share.max.heartbeat.interval.ms", Type.INT, 15_000, _AT_LEAST_1,
        doc="The highest `group.share.heartbeat.interval.ms` allowed.",
    )
    .define(
        "group.share.max.size", Type.INT, 200, Range.between(1, 1_000),
        doc="Members a share group may have.",
    )
    .define(
        "group.share.record.lock.duration.ms", Type.INT, 30_000, Range.between(1_000, 3_600_000),
        doc="How long a record delivered to a share group member stays acquired before it is "
        "available again (a group's `share.record.lock.duration.ms` overrides it).",
    )
    .define(
        "group.share.min.record.lock.duration.ms", Type.INT, 15_000,
        Range.between(1_000, 30_000),
        doc="The lowest record-lock duration allowed (broker or group config).",
    )
    .define(
        "group.share.max.record.lock.duration.ms", Type.INT, 60_000,
        Range.between(30_000, 3_600_000),
        doc="The highest record-lock duration allowed (broker or group config).",
    )
    .define(
        "group.share.delivery.count.limit", Type.INT, 5, Range.between(2, 10),
        doc="Deliveries of a record to a share group before it is archived (a group's "
        "`share.delivery.count.limit` overrides it).",
    )
    .define(
        "group.share.min.delivery.count.limit", Type.INT, 2, Range.between(2, 5),
        doc="The lowest delivery-count limit allowed (broker or group config).",
    )
    .define(
        "group.share.max.delivery.count.limit", Type.INT, 10, Range.between(5, 25),
        doc="The highest delivery-count limit allowed (broker or group config).",
    )
    .define(
        "group.share.partition.max.record.locks", Type.INT, 2_000, Range.between(100, 10_000),
        doc="Records of one share-partition that may be acquired at once.",
    )
    .define(
        "group.share.max.share.sessions", Type.INT, 2_000, _AT_LEAST_1,
        doc="Share sessions a broker holds at once (at least `group.share.max.size`).",
    )
)  # fmt: skip


def _within(values: Mapping[str, Any], prefix: str, what: str) -> None:
    """``<prefix>.<what>`` within ``<prefix>.min.<what>`` and ``<prefix>.max.<what>``."""
    key = f"{prefix}.{what}"
    low, high = values[f"{prefix}.min.{what}"], values[f"{prefix}.max.{what}"]
    if high < low:
        raise GroupConfigError(
            f"{prefix}.max.{what}: expected at least {prefix}.min.{what} ({low}), found {high}"
        )
    if not low <= values[key] <= high:
        raise GroupConfigError(
            f"{key}: expected {low} to {high} ({prefix}.min.{what} to {prefix}.max.{what}), "
            f"found {values[key]}"
        )


def _beats(values: Mapping[str, Any], prefix: str) -> None:
    """``<prefix>.heartbeat.interval.ms`` below ``<prefix>.session.timeout.ms``."""
    beat, session = (
        values[f"{prefix}.heartbeat.interval.ms"],
        values[f"{prefix}.session.timeout.ms"],
    )
    if beat >= session:
        raise GroupConfigError(
            f"{prefix}.heartbeat.interval.ms: expected less than {prefix}.session.timeout.ms "
            f"({session}), found {beat}"
        )


@dataclass(frozen=True)
class ConsumerGroupConfig:
    """The ``group.consumer.*`` keys: read by ``ConsumerGroupCoordinator``."""

    session_timeout_ms: int = 45_000
    min_session_timeout_ms: int = 45_000
    max_session_timeout_ms: int = 60_000
    heartbeat_interval_ms: int = 5_000
    min_heartbeat_interval_ms: int = 5_000
    max_heartbeat_interval_ms: int = 15_000
    max_size: int = MAX_INT32
    #: Sluice's assignor names (Kafka's class names mapped to them); the first is the default
    assignors: tuple[str, ...] = ("uniform", "range")
    migration_policy: str = "bidirectional"

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ConsumerGroupConfig:
        """The settings of a broker's properties; raises :class:`GroupConfigError`."""
        values = CONFIG_DEF.parse(props)
        _within(values, "group.consumer", "session.timeout.ms")
        _within(values, "group.consumer", "heartbeat.interval.ms")
        _beats(values, "group.consumer")
        return cls(
            session_timeout_ms=values["group.consumer.session.timeout.ms"],
            min_session_timeout_ms=values["group.consumer.min.session.timeout.ms"],
            max_session_timeout_ms=values["group.consumer.max.session.timeout.ms"],
            heartbeat_interval_ms=values["group.consumer.heartbeat.interval.ms"],
            min_heartbeat_interval_ms=values["group.consumer.min.heartbeat.interval.ms"],
            max_heartbeat_interval_ms=values["group.consumer.max.heartbeat.interval.ms"],
            max_size=values["group.consumer.max.size"],
            assignors=tuple(
                KAFKA_ASSIGNOR_CLASSES.get(a, a) for a in values["group.consumer.assignors"]
            ),
            migration_policy=values["group.consumer.migration.policy"],
        )


@dataclass(frozen=True)
class ShareGroupConfig:
    """The ``group.share.*`` keys: read by the share coordinator (``sluice.broker.share``)."""

    session_timeout_ms: int = 45_000
    min_session_timeout_ms: int = 45_000
    max_session_timeout_ms: int = 60_000
    heartbeat_interval_ms: int = 5_000
    min_heartbeat_interval_ms: int = 5_000
    max_heartbeat_interval_ms: int = 15_000
    max_size: int = 200
    record_lock_duration_ms: int = 30_000
    min_record_lock_duration_ms: int = 15_000
    max_record_lock_duration_ms: int = 60_000
    delivery_count_limit: int = 5
    min_delivery_count_limit: int = 2
    max_delivery_count_limit: int = 10
    partition_max_record_locks: int = 2_000
    max_share_sessions: int = 2_000

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ShareGroupConfig:
        """The settings of a broker's properties; raises :class:`GroupConfigError`."""
        values = CONFIG_DEF.parse(props)
        _within(values, "group.share", "session.timeout.ms")
        _within(values, "group.share", "heartbeat.interval.ms")
        _beats(values, "group.share")
        _within(values, "group.share", "record.lock.duration.ms")
        _within(values, "group.share", "delivery.count.limit")
        sessions, size = values["group.share.max.share.sessions"], values["group.share.max.size"]
        if sessions < size:
            raise GroupConfigError(
                f"group.share.max.share.sessions: expected at least group.share.max.size "
                f"({size}), found {sessions}"
            )
        return cls(
            session_timeout_ms=values["group.share.session.timeout.ms"],
            min_session_timeout_ms=values["group.share.min.session.timeout.ms"],
            max_session_timeout_ms=values["group.share.max.session.timeout.ms"],
            heartbeat_interval_ms=values["group.share.heartbeat.interval.ms"],
            min_heartbeat_interval_ms=values["group.share.min.heartbeat.interval.ms"],
            max_heartbeat_interval_ms=values["group.share.max.heartbeat.interval.ms"],
            max_size=size,
            record_lock_duration_ms=values["group.share.record.lock.duration.ms"],
            min_record_lock_duration_ms=values["group.share.min.record.lock.duration.ms"],
            max_record_lock_duration_ms=values["group.share.max.record.lock.duration.ms"],
            delivery_count_limit=values["group.share.delivery.count.limit"],
            min_delivery_count_limit=values["group.share.min.delivery.count.limit"],
            max_delivery_count_limit=values["group.share.max.delivery.count.limit"],
            partition_max_record_locks=values["group.share.partition.max.record.locks"],
            max_share_sessions=sessions,
        )
