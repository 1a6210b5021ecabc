"""``TransactionConfig``: the transaction coordinator's settings, under Kafka's broker keys.

The keys are declared once, in :data:`CONFIG_DEF` (the "transactions" section of
``docs/configuration.md`` is generated from it); each is a positive integer.

Pure value object; thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sluice.common.config_def import POSITIVE, ConfigDef, Type


class TransactionConfigError(ValueError):
    """A ``transaction.*`` key holds a value out of its range."""


CONFIG_DEF = (
    ConfigDef(error=TransactionConfigError, what="broker configuration")
    .define(
        "transaction.state.log.num.partitions", Type.INT, 50, POSITIVE,
        doc="Partitions of `__transaction_state`.",
    )
    .define(
        "transaction.state.log.replication.factor", Type.INT, 3, POSITIVE,
        doc="Replicas of `__transaction_state`; at most the live brokers when it is created.",
    )
    .define(
        "transaction.max.timeout.ms", Type.INT, 900_000, POSITIVE,
        doc="The largest transaction timeout a producer may ask for.",
    )
    .define(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms", Type.INT, 10_000,
        POSITIVE, doc="How often timed-out transactions are looked for and aborted.",
    )
    .define(
        "transactional.id.expiration.ms", Type.INT, 604_800_000, POSITIVE,
        doc="A transactional id idle this long (7 days) is removed.",
    )
    .define(
        "transaction.remove.expired.transaction.cleanup.interval.ms", Type.INT, 3_600_000,
        POSITIVE, doc="How often expired transactional ids are looked for.",
    )
)  # fmt: skip


@dataclass(frozen=True)
class TransactionConfig:
    state_log_num_partitions: int = 50
    state_log_replication_factor: int = 3
    max_timeout_ms: int = 900_000
    abort_timed_out_interval_ms: int = 10_000
    id_expiration_ms: int = 604_800_000  # 7 days
    remove_expired_interval_ms: int = 3_600_000

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TransactionConfig:
        """The settings of a broker's properties; raises :class:`TransactionConfigError`."""
        values = CONFIG_DEF.parse(props)
        return cls(
            state_log_num_partitions=values["transaction.state.log.num.partitions"],
            state_log_replication_factor=values["transaction.state.log.replication.factor"],
            max_timeout_ms=values["transaction.max.timeout.ms"],
            abort_timed_out_interval_ms=values[
                "transaction.abort.timed.out.transaction.cleanup.interval.ms"
            ],
            id_expiration_ms=values["transactional.id.expiration.ms"],
            remove_expired_interval_ms=values[
                "transaction.remove.expired.transaction.cleanup.interval.ms"
            ],
        )
