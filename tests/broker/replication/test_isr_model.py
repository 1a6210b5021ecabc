"""The leader's ISR expansion rule (Partition) against a model, over random fetch sequences.

The model is Kafka's ``Partition.maybeExpandIsr`` written out plainly: after follower *r*
fetched at offset *o*, the ISR grows by exactly *r* if *r* is a replica outside the ISR and
*o* has reached the high watermark and the start of the leader's epoch — no other follower
is ever judged, whatever its last fetch said.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.broker.log.log import Log
from sluice.broker.log.log_config import LogConfig
from sluice.broker.log.records import encode_batch
from sluice.broker.replication.partition import Partition
from sluice.common.topic_partition import TopicPartition

REPLICAS = (1, 2, 3, 4)
MAX_LAG_MS = 1_000

STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3)),
        # a follower fetching at its LEO: some fraction of the way to the leader's log end
        st.tuples(st.just("fetch"), st.sampled_from(REPLICAS[1:]), st.integers(0, 4)),
        st.tuples(st.just("tick"), st.integers(100, 1_500)),
    ),
    max_size=60,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@settings(max_examples=120, deadline=None)
@given(STEPS)
def test_only_the_fetching_follower_joins_and_only_once_caught_up(steps):
    with tempfile.TemporaryDirectory() as tmp:
        clock = Clock()
        log = Log(Path(tmp) / "t-0", LogConfig())
        p = Partition(TopicPartition("t", 0), log, broker_id=1, clock=clock)
        p.become_leader(3, REPLICAS, (1, 2), zk_version=0)
        fetched: dict[int, int] = {}  # the model: each follower's last fetch offset
        version = 0
        for step in steps:
            if step[0] == "append":
                log.append(encode_batch([(b"k", b"v")] * step[1]), leader_epoch=3)
                p.maybe_advance_hw()  # as the replica manager does after an append
            elif step[0] == "tick":
                clock.now += step[1]
                shrunk = p.isr_to_shrink(MAX_LAG_MS)
                if shrunk is not None:
                    version += 1
                    p.update_state(shrunk, version)
            else:
                _, replica, quarter = step
                offset = log.log_end_offset * quarter // 4
                offset = max(offset, fetched.get(replica, 0))  # a LEO never goes back
                fetched[replica] = offset
                p.record_follower_fetch(replica, offset)
                isr_before = p.isr
                expected = (
                    isr_before + (replica,)
                    if replica not in isr_before
                    and offset >= log.high_watermark
                    and offset >= p.epoch_start_offset
                    else None
                )
                assert p.isr_to_expand(replica) == expected
                if expected is not None:
                    version += 1
                    p.update_state(expected, version)
            # The HW is the smallest LEO over the ISR, the leader's own included.
            leos = [log.log_end_offset] + [fetched.get(r, -1) for r in p.isr if r != 1]
            assert log.high_watermark == max(min(leos), 0)
        log.close()
