"""``__transaction_state`` records: round trip, the partition of an id, corrupt records."""

import pytest

from sluice.broker.transactions import transaction_log as txn_log
from sluice.broker.transactions.transaction_metadata import (
    IllegalTransitionError,
    TransactionMetadata,
    TransactionState,
)


def test_round_trip_with_pending_offsets():
    meta = TransactionMetadata(
        "orders-tx", 4000, 3, 60_000, TransactionState.PREPARE_COMMIT,
        partitions=frozenset({("orders", 0), ("orders", 2)}), groups=frozenset({"g"}),
        txn_start_ms=10, last_update_ms=20, pending_offsets={"g": {("src", 1): (42, -1, None)}},
    )  # fmt: skip
    assert txn_log.decode(txn_log.encode_key("orders-tx"), txn_log.encode_value(meta)) == (
        "orders-tx", meta,
    )  # fmt: skip
    assert txn_log.decode(txn_log.encode_key("x"), None) == ("x", None)


def test_partition_is_kafkas_hash():
    # Utils.abs("my-txn".hashCode) % 50, as Kafka's TransactionStateManager.partitionFor.
    assert txn_log.partition_for("my-txn", 50) == abs(-1061187895) % 50


def test_corrupt_records_are_refused():
    with pytest.raises(txn_log.CorruptTransactionLogError):
        txn_log.decode(b"not json", b"{}")
    with pytest.raises(txn_log.CorruptTransactionLogError, match="expected value version 1"):
        txn_log.decode(txn_log.encode_key("x"), b'{"version": 9}')


def test_illegal_transitions_are_refused():
    meta = TransactionMetadata("t", 1, 0, 1000)
    with pytest.raises(IllegalTransitionError, match="found Empty"):
        meta.staged(TransactionState.PREPARE_COMMIT, 0)
