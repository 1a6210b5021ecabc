"""A follower's ``FetchSessionHandler`` against the leader's ``FetchSessionCache``: after
every answered request, the session the leader holds names exactly the partitions the
follower wants, each with the fetch offset, log start and epoch it wants — whatever the
sequence of partitions added, moved and dropped, sessions evicted at the leader and
connections lost."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.broker.protocol.errors import Errors
from sluice.broker.replication.fetch_session_handler import FetchSessionHandler, PartitionRequest
from sluice.broker.server.fetch_session import CachedPartition, ContextKind, FetchSessionCache
from sluice.common.topic_partition import TopicPartition

TPS = [TopicPartition(t, p) for t in ("a", "b") for p in range(4)]

steps = st.lists(
    st.tuples(
        st.dictionaries(st.sampled_from(TPS), st.none() | st.integers(0, 100)),  # set / drop
        st.sampled_from(["answered", "answered", "answered", "evicted", "connection lost"]),
    ),
    max_size=25,
)


def leader_view(cache: FetchSessionCache, session_id: int) -> dict[TopicPartition, tuple]:
    session = cache.sessions[session_id]
    return {
        tp: (cp.fetch_offset, cp.log_start_offset, cp.current_leader_epoch, cp.max_bytes)
        for tp, cp in session.partitions.items()
    }


@settings(max_examples=200)
@given(steps)
def test_the_leaders_session_is_what_the_follower_wants(
    seq: list[tuple[dict[TopicPartition, int | None], str]],
) -> None:
    cache = FetchSessionCache()
    handler = FetchSessionHandler()
    wanted: dict[TopicPartition, PartitionRequest] = {}
    changed: set[TopicPartition] = set()
    for updates, outcome in seq:
        for tp, offset in updates.items():
            if offset is None:
                wanted.pop(tp, None)
            else:
                wanted[tp] = PartitionRequest(offset, 0, 1, 1 << 20)
            changed.add(tp)
        request = handler.build(wanted, changed)
        changed = set()
        if outcome == "connection lost":
            handler.reset()  # what the fetcher does; the leader may or may not have seen it
            continue
        if outcome == "evicted" and request.session_id in cache.sessions:
            cache.remove(request.session_id)
        requested = [
            CachedPartition(tp, r.fetch_offset, r.max_bytes, r.current_leader_epoch,
                            r.log_start_offset)
            for tp, r in request.partitions.items()
        ]  # fmt: skip
        context = cache.context(
            request.session_id, request.epoch, requested, request.forgotten, privileged=True
        )
        session_id = 0
        error = Errors.NONE
        if context.kind is ContextKind.ERROR:
            error = context.error
        elif context.kind is ContextKind.FULL:
            created = cache.create(True, requested)
            session_id = created.id if created is not None else 0
        elif context.kind is ContextKind.INCREMENTAL:
            assert context.session is not None
            session_id = context.session.id
        handler.handle_response(error, session_id)
        if handler.session_id != 0:
            expected = {
                tp: (r.fetch_offset, r.log_start_offset, r.current_leader_epoch, r.max_bytes)
                for tp, r in wanted.items()
            }
            assert leader_view(cache, handler.session_id) == expected
            assert cache.sessions[handler.session_id].epoch == handler.epoch
        else:
            assert handler.epoch == 0  # the next request is full
