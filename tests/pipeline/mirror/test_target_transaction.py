"""``TargetTransactions``: librdkafka's transactional errors sorted into the loop's decisions
(retry, abort and mirror the batch again, stop as fenced), with a fake producer."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from sluice.pipeline.mirror.errors import CommitError, MirrorError, MirrorFencedError
from sluice.pipeline.mirror.target_transaction import TargetTransactions


class FakeProducer:
    """Raises the queued errors, one per call, then succeeds; records the calls."""

    def __init__(self, *errors: KafkaError) -> None:
        self.errors = list(errors)
        self.calls: list[str] = []

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if self.errors:
            raise KafkaException(self.errors.pop(0))

    def init_transactions(self, timeout: float) -> None:
        self._call("init")

    def begin_transaction(self) -> None:
        self._call("begin")

    def commit_transaction(self, timeout: float) -> None:
        self._call("commit")

    def abort_transaction(self, timeout: float) -> None:
        self._call("abort")


def transactions(producer: Any, timeout_ms: int = 5000) -> TargetTransactions:
    return TargetTransactions(producer, "live", "sluice-mirror-live", timeout_ms)


def test_a_retriable_error_is_retried() -> None:
    producer = FakeProducer(KafkaError(KafkaError._TIMED_OUT, "slow", retriable=True))
    assert transactions(producer).commit()
    assert producer.calls == ["commit", "commit"]


def test_an_abortable_error_aborts_and_answers_false() -> None:
    producer = FakeProducer(
        KafkaError(KafkaError.NOT_ENOUGH_REPLICAS, "refused", txn_requires_abort=True)
    )
    assert transactions(producer).commit() is False
    assert producer.calls == ["commit", "abort"]


def test_fenced_is_its_own_error() -> None:
    fenced = KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True)
    producer = FakeProducer(fenced)
    with pytest.raises(MirrorFencedError, match="transactional.id sluice-mirror-live"):
        transactions(producer).begin()
    producer = FakeProducer(KafkaError(KafkaError.PRODUCER_FENCED, "fenced"))
    with pytest.raises(MirrorFencedError):
        transactions(producer).abort()


def test_other_fatal_and_lasting_errors_stop_the_loop() -> None:
    producer = FakeProducer(KafkaError(KafkaError._STATE, "bad state", fatal=True))
    with pytest.raises(MirrorError, match="fatal producer error") as info:
        transactions(producer).init()
    assert not isinstance(info.value, MirrorFencedError)
    retriable = KafkaError(KafkaError._TIMED_OUT, "slow", retriable=True)
    producer = FakeProducer(*[retriable] * 100)
    with pytest.raises(CommitError, match="within commit.timeout.ms=300"):
        transactions(producer, timeout_ms=300).commit()
    producer = FakeProducer(KafkaError(KafkaError.INVALID_CONFIG, "no"))
    with pytest.raises(CommitError):
        transactions(producer).init()
