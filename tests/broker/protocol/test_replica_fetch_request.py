"""The hand-written follower Fetch v11 request against kio's encoding, byte for byte, and as
the broker decodes it."""

from hypothesis import given
from hypothesis import strategies as st

from sluice.broker.protocol import decode_request, encode_request
from sluice.broker.protocol.apis import request_type
from sluice.broker.protocol.build import build
from sluice.broker.protocol.replica_fetch_request import (
    API_KEY,
    VERSION,
    FetchPosition,
    encode_replica_fetch,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(alphabet="abcdefghij._-é", min_size=1, max_size=12)
positions = st.lists(st.builds(FetchPosition, INT32, INT32, INT64, INT64, INT32), max_size=4)
topics = st.lists(st.tuples(names, positions), max_size=4)
forgotten = st.lists(st.tuples(names, st.lists(INT32, max_size=4)), max_size=3)


def _kio(replica_id, max_wait_ms, session_id, epoch, topic_list, forgotten_list, rack):
    return build(
        request_type(API_KEY, VERSION),
        {
            "replica_id": replica_id, "max_wait": max_wait_ms, "min_bytes": 1,
            "max_bytes": 16 << 20, "isolation_level": 0, "session_id": session_id,
            "session_epoch": epoch, "rack_id": rack,
            "topics": [
                {"topic": t, "partitions": [
                    {"partition": p.partition, "current_leader_epoch": p.current_leader_epoch,
                     "fetch_offset": p.fetch_offset, "log_start_offset": p.log_start_offset,
                     "partition_max_bytes": p.partition_max_bytes} for p in ps]}
                for t, ps in topic_list
            ],
            "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in forgotten_list],
        },
    )  # fmt: skip


def _hand(correlation_id, client_id, replica_id, max_wait_ms, session_id, epoch, topic_list,
          forgotten_list, rack):  # fmt: skip
    return encode_replica_fetch(
        correlation_id, client_id, replica_id=replica_id, max_wait_ms=max_wait_ms,
        min_bytes=1, max_bytes=16 << 20, isolation_level=0, session_id=session_id,
        session_epoch=epoch, topics=topic_list, forgotten=forgotten_list, rack_id=rack,
    )  # fmt: skip


@given(
    st.integers(0, 2**31 - 1), st.one_of(st.none(), names), st.integers(0, 2**31 - 1),
    st.integers(0, 2**31 - 1), INT32, INT32, topics, forgotten, st.sampled_from(["", "rack-1"]),
)  # fmt: skip
def test_encode_matches_kio(cid, client_id, replica_id, max_wait, session_id, epoch, topic_list,
                            forgotten_list, rack):  # fmt: skip
    expected = encode_request(
        cid, client_id,
        _kio(replica_id, max_wait, session_id, epoch, topic_list, forgotten_list, rack),
    )  # fmt: skip
    found = _hand(cid, client_id, replica_id, max_wait, session_id, epoch, topic_list,
                  forgotten_list, rack)  # fmt: skip
    assert found == expected


def test_the_broker_decodes_what_a_follower_sends():
    frame = _hand(7, "broker-2-fetcher", 2, 500, 1234, 5,
                  [("clicks", [FetchPosition(0, 3, 42, 0, 1 << 20),
                               FetchPosition(4, 3, 9, 2, 1 << 20)])],
                  [("gone", [1, 2])], "")  # fmt: skip
    request = decode_request(frame[4:])
    assert (request.header.api_key, request.header.api_version) == (API_KEY, VERSION)
    assert request.header.correlation_id == 7
    assert request.header.client_id == "broker-2-fetcher"
    body = request.body
    assert (body.replica_id, body.session_id, body.session_epoch) == (2, 1234, 5)
    [topic] = body.topics
    assert topic.topic == "clicks"
    assert [(p.partition, p.current_leader_epoch, p.fetch_offset, p.log_start_offset)
            for p in topic.partitions] == [(0, 3, 42, 0), (4, 3, 9, 2)]  # fmt: skip
    assert [(f.topic, list(f.partitions)) for f in body.forgotten_topics_data] == [("gone", [1, 2])]
