"""``TransactionConfig``: the transaction coordinator's settings, under Kafka's broker keys.

=====================================================================  ==========  ==========
key                                                                    default     meaning
=====================================================================  ==========  ==========
transaction.state.log.num.partitions                                   50          partitions
transaction.state.log.replication.factor                               3           at most the
                                                                                   live brokers
transaction.max.timeout.ms                                             900000      largest
                                                                                   producer
                                                                                   timeout
transaction.abort.timed.out.transaction.cleanup.interval.ms            10000       timeout scan
transactional.id.expiration.ms                                         604800000   idle id
                                                                                   removed
                                                                                   after
transaction.remove.expired.transaction.cleanup.interval.ms             3600000     expiry scan
=====================================================================  ==========  ==========

Pure value object; thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sluice.common import options


class TransactionConfigError(ValueError):
    """A ``transaction.*`` key holds a value out of its range."""


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

        def positive(key: str, default: int) -> int:
            return (
                options.positive_int(props, key, default, error=TransactionConfigError) or default
            )

        return cls(
            state_log_num_partitions=positive("transaction.state.log.num.partitions", 50),
            state_log_replication_factor=positive("transaction.state.log.replication.factor", 3),
            max_timeout_ms=positive("transaction.max.timeout.ms", 900_000),
            abort_timed_out_interval_ms=positive(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms", 10_000
            ),
            id_expiration_ms=positive("transactional.id.expiration.ms", 604_800_000),
            remove_expired_interval_ms=positive(
                "transaction.remove.expired.transaction.cleanup.interval.ms", 3_600_000
            ),
        )
