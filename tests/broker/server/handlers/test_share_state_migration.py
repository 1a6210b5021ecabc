"""A broker of this version finds the share-group state files an earlier Sluice kept in its
first log dir and moves them into ``__share_group_state``: the group goes on from the stored
start, with what was acknowledged or archived kept, and the files are gone once the states are
committed."""

from __future__ import annotations

import pytest

from sluice.broker.share.share_partition import RecordState
from tests.broker.server.broker_process import StartBroker
from tests.broker.server.handlers.test_share_fetch import ShareMember, drain, produce
from tests.broker.share.test_share_state_files import write_old_file

pytestmark = [pytest.mark.broker]


def test_a_broker_moves_the_files_into_the_topic(start_broker: StartBroker) -> None:
    broker = start_broker()
    topic, group = "share-moved", "sg-moved"
    broker.create_topic(topic, 1)
    produce(broker, topic, 1, 10)
    broker.stop()
    # What an earlier version wrote: start 3; 3 available (delivered once), 4 acknowledged,
    # 5 archived; 6-9 never delivered.
    records = [[3, int(RecordState.AVAILABLE), 1], [4, int(RecordState.ACKNOWLEDGED), 1],
               [5, int(RecordState.ARCHIVED), 1]]  # fmt: skip
    old = write_old_file(broker.log_dir, group, {f"{topic}:0": {"start": 3, "records": records}})
    broker.start()
    assert not old.exists(), "the state file was not moved"
    member = ShareMember(broker, group, topic)
    member.heartbeat()
    member.heartbeat()
    try:
        got = drain([member])[member]
    finally:
        member.close()
    assert got == {(0, 3): 2, (0, 6): 1, (0, 7): 1, (0, 8): 1, (0, 9): 1}
