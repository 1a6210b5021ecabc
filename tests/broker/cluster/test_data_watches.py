"""``DataWatches`` on a real ZooKeeper: what a callback sees is what kazoo's ``DataWatch``
gives it (absent, created, changed, deleted; ``False`` ends the watch), for many paths at once."""

from __future__ import annotations

import queue
import threading
from typing import Any

from kazoo.client import KazooClient

from sluice.broker.cluster.data_watches import DataWatches

WAIT = 10.0  # seconds for one callback; a bound, not a pause


class Seen:
    """The callbacks of the watches, in order, per path."""

    def __init__(self) -> None:
        self.calls: queue.Queue[tuple[str, bytes | None]] = queue.Queue()
        self.stop_after: set[str] = set()

    def callback(self, path: str) -> Any:
        def call(data: bytes | None, _stat: object) -> bool | None:
            self.calls.put((path, data))
            return False if path in self.stop_after else None

        return call

    def next(self) -> tuple[str, bytes | None]:
        return self.calls.get(timeout=WAIT)


def test_absent_created_changed_deleted(zk_client: KazooClient) -> None:
    watches, seen = DataWatches(zk_client), Seen()
    try:
        watches.add("/w/a", seen.callback("/w/a"))
        assert seen.next() == ("/w/a", None)
        zk_client.create("/w/a", b"1", makepath=True)
        assert seen.next() == ("/w/a", b"1")
        zk_client.set("/w/a", b"2")
        assert seen.next() == ("/w/a", b"2")
        zk_client.delete("/w/a")
        assert seen.next() == ("/w/a", None)
    finally:
        watches.close()


def test_false_ends_a_watch_and_many_paths_are_read_at_once(zk_client: KazooClient) -> None:
    watches, seen = DataWatches(zk_client), Seen()
    paths = [f"/m/{i}" for i in range(500)]
    for i, path in enumerate(paths):
        zk_client.create(path, str(i).encode(), makepath=True)
    try:
        seen.stop_after.add(paths[0])
        for path in paths:
            watches.add(path, seen.callback(path))
        first = dict(seen.next() for _ in paths)
        assert first == {p: str(i).encode() for i, p in enumerate(paths)}
        zk_client.set(paths[0], b"ignored")  # its watch ended
        zk_client.set(paths[1], b"new")
        assert seen.next() == (paths[1], b"new")
        assert seen.calls.empty(), f"expected no other callback, found {seen.calls.get()}"
    finally:
        watches.close()


def test_no_callback_after_close(zk_client: KazooClient) -> None:
    watches, seen = DataWatches(zk_client), Seen()
    zk_client.create("/c/a", b"1", makepath=True)
    watches.add("/c/a", seen.callback("/c/a"))
    assert seen.next() == ("/c/a", b"1")
    watches.close()
    changed = threading.Event()
    zk_client.DataWatch("/c/a", lambda data, _stat: changed.set() if data == b"2" else None)
    zk_client.set("/c/a", b"2")
    assert changed.wait(WAIT)
    # The kazoo watch above saw the change: the closed watch, fired by the same event, read
    # nothing (a read would have to answer on the completion thread: give it the time to).
    zk_client.get("/c/a")
    assert seen.calls.empty(), f"expected no callback after close, found {seen.calls.get()}"
