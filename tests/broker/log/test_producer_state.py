"""Idempotence: duplicates acknowledged with their original offsets, gaps and zombies refused,
state kept across clean and unclean restarts and truncation."""

import pytest

from sluice.broker.log.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    OutOfOrderSequenceError,
    UnknownProducerIdError,
)
from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.records import encode_batch

CONFIG = LogConfig(segment_bytes=400)


def produce(pid, seq, n=2, epoch=0, tag=b""):
    records = [(b"k", b"v%d" % (seq + i) + tag) for i in range(n)]
    return encode_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


@pytest.fixture
def log(tmp_path):
    lg = Log(tmp_path / "t-0", CONFIG)
    yield lg
    lg.close()


def test_a_retry_of_any_of_the_last_five_batches_is_not_appended_again(log):
    infos = [log.append(produce(7, seq)) for seq in range(0, 12, 2)]
    end = log.log_end_offset
    for info, seq in list(zip(infos, range(0, 12, 2), strict=True))[1:]:
        retry = log.append(produce(7, seq))
        assert retry.duplicate
        assert (retry.first_offset, retry.last_offset) == (info.first_offset, info.last_offset)
    assert log.log_end_offset == end
    # The oldest of six is no longer remembered: its sequence is now out of order.
    with pytest.raises(OutOfOrderSequenceError, match="expected sequence 12, found 0"):
        log.append(produce(7, 0))


def test_sequence_gap_is_out_of_order(log):
    log.append(produce(7, 0))
    with pytest.raises(OutOfOrderSequenceError, match="expected sequence 2, found 4"):
        log.append(produce(7, 4))
    assert log.log_end_offset == 2


def test_epochs(log):
    log.append(produce(7, 0, epoch=1))
    with pytest.raises(InvalidProducerEpochError, match="expected epoch >= 1, found 0"):
        log.append(produce(7, 2, epoch=0))
    with pytest.raises(OutOfOrderSequenceError, match="new epoch 2"):
        log.append(produce(7, 5, epoch=2))
    log.append(produce(7, 0, epoch=2))
    with pytest.raises(UnknownProducerIdError):
        log.append(produce(8, 3))


def test_sequences_wrap(log):
    log.append(produce(9, 0))
    log.producer_state.entries[9].batches[-1] = (
        log.producer_state.entries[9].batches[-1].__class__(2**31 - 2, 2**31 - 1, 0, 1)
    )
    log.append(produce(9, 0, epoch=0, tag=b"wrapped"))


def test_a_coordinators_batches_are_fenced_by_epoch_but_carry_no_sequence(log):
    """Kafka's AppendOrigin.COORDINATOR: the group coordinator writes every transactional
    offsets batch of a producer with sequence 0; none is a duplicate or out of order, and an
    older epoch is still refused."""
    first = log.append(produce(7, 0, epoch=1), coordinator=True)
    again = log.append(produce(7, 0, epoch=1), coordinator=True)
    assert not again.duplicate and again.first_offset == first.last_offset + 1
    log.append(produce(7, 0, n=1, epoch=1), coordinator=True)
    with pytest.raises(InvalidProducerEpochError, match="expected epoch >= 1, found 0"):
        log.append(produce(7, 0, epoch=0), coordinator=True)
    # A client's batch of the same producer is still checked against what was appended.
    with pytest.raises(OutOfOrderSequenceError, match="expected sequence 1, found 5"):
        log.append(produce(7, 5, epoch=1))
    assert log.log_end_offset == 5


def test_non_idempotent_producers_are_not_checked(log):
    log.append(encode_batch([(b"k", b"v")]))
    log.append(encode_batch([(b"k", b"v")]))
    assert log.log_end_offset == 2


def test_one_batch_per_append_from_an_idempotent_producer(log):
    with pytest.raises(InvalidRecordError, match="one batch per append"):
        log.append(produce(7, 0) + produce(7, 2))


@pytest.mark.parametrize("clean", [True, False])
def test_state_survives_restarts(tmp_path, clean):
    log = Log(tmp_path / "t-0", CONFIG)
    infos = [log.append(produce(7, seq)) for seq in range(0, 40, 2)]  # rolls several times
    assert log.segment_count > 2
    if clean:
        log.close()
    else:
        for seg in log.segments():
            seg.close()
    again = Log(tmp_path / "t-0", CONFIG, clean_shutdown=clean, recovery_point=0)
    retry = again.append(produce(7, 38))
    assert retry.duplicate and retry.first_offset == infos[-1].first_offset
    again.append(produce(7, 40))
    again.close()


def test_truncation_forgets_removed_batches(log):
    for seq in range(0, 20, 2):
        log.append(produce(7, seq))
    log.truncate_to(10)  # batches with sequences 10.. are gone
    log.append(produce(7, 10, tag=b"again"))  # not a duplicate any more
    assert log.log_end_offset == 12


def test_corrupt_snapshot_falls_back_to_replay(tmp_path):
    log = Log(tmp_path / "t-0", CONFIG)
    for seq in range(0, 20, 2):
        log.append(produce(7, seq))
    log.close()
    for path in (tmp_path / "t-0").glob("*.snapshot"):
        path.write_text("{not json")
    again = Log(tmp_path / "t-0", CONFIG)
    assert again.append(produce(7, 18)).duplicate
    again.close()
