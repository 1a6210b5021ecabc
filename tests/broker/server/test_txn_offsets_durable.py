"""Transactional offsets are durable in ``__consumer_offsets`` on a real standalone broker
(confluent-kafka's ``send_offsets_to_transaction``): TxnOffsetCommit writes a transactional
batch of the producer there, EndTxn's marker follows it, and a broker killed (-9) finds the
offsets again in the log — committed after a COMMIT marker, gone after an ABORT.

(A standalone broker is the transaction's coordinator too, so killing it mid-transaction
kills the transaction: the restarted coordinator aborts it. The cluster test kills a group
coordinator that is not the transaction's: tests/broker/cluster/test_cluster_txn_offsets.py.)
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from sluice.broker.log.control_batch import ABORT, COMMIT, read_marker
from sluice.broker.log.record_batch import iter_batches
from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.broker_process import StartBroker
from tests.broker.server.clients import FAST_RECONNECT, committed_offset, txn_producer, unique

pytestmark = pytest.mark.broker


def offsets_log(broker: BrokerProcess) -> list[tuple[int, bool, int | None]]:
    """The batches of ``__consumer_offsets-0`` on disk: (producer id, transactional, marker
    kind or None), read from the segment files of the stopped broker."""
    found = []
    for segment in sorted((broker.log_dir / "__consumer_offsets-0").glob("*.log")):
        raw = segment.read_bytes()
        for h in iter_batches(raw):
            marker = read_marker(raw, h) if h.is_control else None
            found.append(
                (h.producer_id, h.is_transactional, None if marker is None else marker.kind)
            )
    return found


def send_offsets(producer: Producer, bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        metadata = consumer.consumer_group_metadata()
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, offset)], metadata, 30)
    finally:
        consumer.close()


def test_committed_offsets_survive_a_kill_after_the_marker(start_broker: StartBroker) -> None:
    broker = start_broker()
    topic, group = unique("src"), unique("group")
    create_topic(broker.bootstrap, topic)
    producer = txn_producer(broker.bootstrap, unique("tx"), **FAST_RECONNECT)
    producer.begin_transaction()
    send_offsets(producer, broker.bootstrap, group, topic, 17)
    # pending: invisible where stability is not required (read_uncommitted)
    assert (
        committed_offset(broker.bootstrap, group, topic, **{"isolation.level": "read_uncommitted"})
        < 0
    )
    producer.commit_transaction(30)
    assert committed_offset(broker.bootstrap, group, topic) == 17
    broker.kill()
    batches = offsets_log(broker)
    pids = {pid for pid, txn, kind in batches if txn and kind is None}
    assert len(pids) == 1, f"expected one producer's transactional offsets, found {batches}"
    (pid,) = pids
    assert (pid, True, COMMIT) in batches, f"expected the COMMIT marker, found {batches}"
    broker.start()
    assert committed_offset(broker.bootstrap, group, topic, timeout=30) == 17


def test_offsets_of_a_transaction_cut_by_a_kill_are_aborted(start_broker: StartBroker) -> None:
    broker = start_broker()
    topic, group, txn_id = unique("src"), unique("group"), unique("tx")
    create_topic(broker.bootstrap, topic)
    producer = txn_producer(broker.bootstrap, txn_id, **FAST_RECONNECT)
    producer.begin_transaction()
    send_offsets(producer, broker.bootstrap, group, topic, 5)
    producer.commit_transaction(30)
    producer.begin_transaction()
    send_offsets(producer, broker.bootstrap, group, topic, 9)  # written, then the broker dies
    broker.restart(kill=True)
    # The restarted coordinator aborts the transaction (its producer is fenced): 5 stays.
    assert committed_offset(broker.bootstrap, group, topic, timeout=30) == 5
    again = txn_producer(broker.bootstrap, txn_id, init_timeout=60, **FAST_RECONNECT)
    again.begin_transaction()
    send_offsets(again, broker.bootstrap, group, topic, 12)
    again.commit_transaction(30)
    assert committed_offset(broker.bootstrap, group, topic) == 12
    broker.restart(kill=True)
    assert committed_offset(broker.bootstrap, group, topic, timeout=30) == 12
    broker.kill()
    kinds = [kind for _, txn, kind in offsets_log(broker) if txn and kind is not None]
    assert ABORT in kinds and COMMIT in kinds, (
        f"expected an ABORT and a COMMIT marker, found {kinds}"
    )
