"""``bench.soak_check.check`` against hand-made logs: each failure it names, and none on a
clean log (no brokers: fast)."""

from __future__ import annotations

from bench.soak_check import check
from bench.soak_workload import Ack, value_of


def acks(*pairs: tuple[int, int]) -> list[Ack]:
    """Acks of partition 0: (seq, offset)."""
    return [Ack(0, seq, offset, 0.0) for seq, offset in pairs]


def log_of(*seqs: int) -> dict[int, list[tuple[int, bytes]]]:
    return {0: [(offset, value_of(0, seq)) for offset, seq in enumerate(seqs)]}


def test_a_clean_log_passes() -> None:
    result = check(acks((0, 0), (1, 1)), log_of(0, 1, 2), [(0, 0, value_of(0, 0))], {0: 1})
    assert result.ok
    assert (result.acked, result.consumed, result.log_records) == (2, 1, 3)


def test_each_failure_is_counted() -> None:
    assert check(acks((0, 0), (1, 1)), log_of(0)).lost == 1
    assert check(acks((0, 0)), log_of(0, 0)).duplicated == 1
    assert check(acks((0, 1), (1, 0)), log_of(1, 0)).reordered == 1
    assert check(acks((0, 0)), log_of(1, 0)).moved == 1  # acked at 0, found at 1
    consumed_lost = check([], log_of(0), [(0, 1, value_of(0, 1))])
    assert consumed_lost.consumed_lost == 1
    ahead = check([], log_of(0, 1), [(0, 0, value_of(0, 0))], {0: 2})
    assert ahead.commits_ahead == 1  # committed 2, only offset 0 was delivered
    assert not ahead.ok


def test_unacknowledged_messages_may_be_missing_or_out_of_order() -> None:
    # seq 1 was never acknowledged: absent is fine, and it is not held to the order.
    assert check(acks((0, 0), (2, 1)), log_of(0, 2)).ok
    assert check(acks((0, 0), (2, 1)), log_of(0, 2, 1)).ok


def test_acks1_losses_are_attributed_to_the_fault_around_them() -> None:
    from bench.soak_check import NO_FAULT, losses_by_fault, lost_acks
    from sluice.testing.faults import Fault

    acked = [Ack(0, 0, 0, 1.0), Ack(0, 1, 1, 9.5), Ack(0, 2, 2, 12.0), Ack(0, 3, 3, 30.0)]
    lost = lost_acks(acked, log_of(0))
    assert [a.seq for a in lost] == [1, 2, 3]
    kill = Fault("leader-kill", "broker 1")
    kill.injected_at, kill.healed_at = 10.0, 15.0
    cut = Fault("partition", "broker 2")
    cut.injected_at, cut.healed_at = 11.0, 14.0
    assert losses_by_fault(lost, [kill, cut]) == {
        "leader-kill broker 1 @10.0s": 1,  # acked 0.5 s before the kill
        "partition broker 2 @11.0s": 1,  # acked while both were on: the latest injected
        NO_FAULT: 1,
    }
